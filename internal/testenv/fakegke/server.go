package fakegke

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	"google.golang.org/api/option"
)

// Node pool and operation statuses, as GKE spells them on the wire.
const (
	StatusProvisioning = "PROVISIONING"
	StatusRunning      = "RUNNING"
	StatusStopping     = "STOPPING"
	StatusError        = "ERROR"

	OpRunning = "RUNNING"
	OpDone    = "DONE"

	OpCreateNodePool = "CREATE_NODE_POOL"
	OpDeleteNodePool = "DELETE_NODE_POOL"
)

// google.rpc.Code values GKE puts in a failed operation's error.
const (
	CodeResourceExhausted  = 8
	CodeFailedPrecondition = 9
)

// Outcome is how a node pool creation ends.
type Outcome int

const (
	// OutcomeSucceed: the pool turns RUNNING after the provisioning latency.
	OutcomeSucceed Outcome = iota
	// OutcomeQuotaExceeded: the operation ends DONE with RESOURCE_EXHAUSTED
	// and GKE's quota message; the pool is left in ERROR.
	OutcomeQuotaExceeded
	// OutcomeStockout: like quota, with GKE's zone-exhausted message.
	OutcomeStockout
	// OutcomeHang: the operation never finishes; the pool stays PROVISIONING.
	OutcomeHang
)

// QuotaMessage and StockoutMessage are what GKE reports for those failures.
const (
	QuotaMessage    = "Insufficient quota to satisfy the request: Not all instances running in IGM after 35.1s. Expected 4, running 0, transitioning 4. Current errors: [GCE_QUOTA_EXCEEDED]: Instance 'gke-tpu-0' creation failed: Quota 'TPUS_PER_PROJECT' exceeded. Limit: 0.0 in region us-central1."
	StockoutMessage = "Insufficient resources to satisfy the request: [ZONE_RESOURCE_POOL_EXHAUSTED]: The zone does not have enough resources available to fulfill the request. Try a different zone, or try again later."
)

// Cluster is what AddCluster registered, for tests that check clusters.get.
type Cluster struct {
	Project, Location, Name string
	Endpoint                string
	CACertificate           string // base64 PEM, as masterAuth.clusterCaCertificate
}

// Call is one request the server received.
type Call struct {
	Method string // GET, POST, DELETE
	Path   string // URL path without the API prefix: projects/.../nodePools/x
	Pool   string // node pool name, when the call is about one
	Status int    // HTTP status returned
}

// Option configures a Server.
type Option func(*Server)

// WithClock replaces time.Now, so tests drive operation progress.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithLatency sets how long a create takes to reach RUNNING and a delete to
// remove the pool (defaults 50ms each: scaled-down minutes).
func WithLatency(create, del time.Duration) Option {
	return func(s *Server) { s.createLatency, s.deleteLatency = create, del }
}

// Server is the fake. Its zero value is not usable; call New.
type Server struct {
	srv *httptest.Server

	now                          func() time.Time
	createLatency, deleteLatency time.Duration

	mu           sync.Mutex
	clusters     map[string]*Cluster                // projects/p/locations/l/clusters/c
	pools        map[string]*pool                   // full pool resource name
	ops          map[string]*operation              // projects/p/locations/l/operations/o
	reservations map[string]*compute.Reservation    // projects/p/zones/z/reservations/r
	policies     map[string]*compute.ResourcePolicy // projects/p/regions/r/resourcePolicies/n
	outcomes     map[string]Outcome                 // by pool name; "" for every pool
	deleteFails  map[string]*failure                // by pool name
	transient    []*failure                         // next requests of any kind
	calls        []Call
	opSeq        int
	onRunning    []func(container.NodePool)
	onDeleted    []func(container.NodePool)
}

type failure struct {
	n    int
	code int
}

type pool struct {
	cluster            string
	np                 container.NodePool
	outcome            Outcome
	readyAt            time.Time
	goneAt             time.Time // set once deleting
	createOp, deleteOp *operation
	reservation        string // key in reservations whose inUseCount it holds
}

type operation struct {
	op     container.Operation
	doneAt time.Time // zero: never (hang) unless done already
}

// New starts a server on loopback; call Close (t.Cleanup(s.Close)) to stop it.
func New(opts ...Option) *Server {
	s := &Server{
		now:           time.Now,
		createLatency: 50 * time.Millisecond,
		deleteLatency: 50 * time.Millisecond,
		clusters:      map[string]*Cluster{},
		pools:         map[string]*pool{},
		ops:           map[string]*operation{},
		reservations:  map[string]*compute.Reservation{},
		policies:      map[string]*compute.ResourcePolicy{},
		outcomes:      map[string]Outcome{},
		deleteFails:   map[string]*failure{},
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/projects/{p}/locations/{l}/clusters/{c}", s.getCluster)
	mux.HandleFunc("POST /v1/projects/{p}/locations/{l}/clusters/{c}/nodePools", s.createPool)
	mux.HandleFunc("GET /v1/projects/{p}/locations/{l}/clusters/{c}/nodePools", s.listPools)
	mux.HandleFunc("GET /v1/projects/{p}/locations/{l}/clusters/{c}/nodePools/{np}", s.getPool)
	mux.HandleFunc("DELETE /v1/projects/{p}/locations/{l}/clusters/{c}/nodePools/{np}", s.deletePool)
	mux.HandleFunc("GET /v1/projects/{p}/locations/{l}/operations/{op}", s.getOperation)
	mux.HandleFunc("GET /compute/v1/projects/{p}/zones/{z}/reservations/{r}", s.getReservation)
	mux.HandleFunc("GET /compute/v1/projects/{p}/regions/{r}/resourcePolicies/{n}", s.getPolicy)
	mux.HandleFunc("POST /compute/v1/projects/{p}/regions/{r}/resourcePolicies", s.insertPolicy)
	s.srv = httptest.NewServer(mux)
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// URL is the server's base URL.
func (s *Server) URL() string { return s.srv.URL }

// ContainerOptions are the client options that point container.NewService
// at the server, without credentials.
func (s *Server) ContainerOptions() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(s.srv.URL + "/"), option.WithHTTPClient(s.srv.Client())}
}

// ComputeOptions are the same for compute.NewService.
func (s *Server) ComputeOptions() []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(s.srv.URL + "/compute/v1/"), option.WithHTTPClient(s.srv.Client())}
}

// AddCluster registers a RUNNING cluster. endpoint and caCert are what
// clusters.get returns (a harness passes its kube-apiserver's).
func (s *Server) AddCluster(project, location, name, endpoint, caCert string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters[clusterKey(project, location, name)] = &Cluster{Project: project, Location: location, Name: name, Endpoint: endpoint, CACertificate: caCert}
}

// SetReservation creates or replaces a specific zonal reservation.
func (s *Server) SetReservation(project, zone, name string, count, inUse int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reservations[reservationKey(project, zone, name)] = &compute.Reservation{
		Name:                name,
		Zone:                zone,
		Status:              "READY",
		SpecificReservation: &compute.AllocationSpecificSKUReservation{Count: count, InUseCount: inUse},
	}
}

// Reservation returns a reservation's count and inUseCount.
func (s *Server) Reservation(project, zone, name string) (count, inUse int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reservations[reservationKey(project, zone, name)]
	if !ok {
		return 0, 0, false
	}
	return r.SpecificReservation.Count, r.SpecificReservation.InUseCount, true
}

// SetCreateOutcome makes creations of the named pool ("" for every pool
// without its own outcome) end as o.
func (s *Server) SetCreateOutcome(poolName string, o Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[poolName] = o
}

// FailDeletes makes the next n deletes of the named pool fail with HTTP
// status code (503 for a transient failure, 400 for a permanent one).
func (s *Server) FailDeletes(poolName string, n, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteFails[poolName] = &failure{n: n, code: code}
}

// FailNext makes the next n requests of any kind fail with HTTP status code.
func (s *Server) FailNext(n, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transient = append(s.transient, &failure{n: n, code: code})
}

// OnPoolRunning registers f to run (outside the server's lock) when a pool
// turns RUNNING. Progress is evaluated on every request and on Sync.
func (s *Server) OnPoolRunning(f func(container.NodePool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRunning = append(s.onRunning, f)
}

// OnPoolDeleted registers f to run when a deleted pool disappears.
func (s *Server) OnPoolDeleted(f func(container.NodePool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDeleted = append(s.onDeleted, f)
}

// Sync advances every pool and operation to the clock's present and runs the
// hooks; a harness calls it from a ticker when nobody polls.
func (s *Server) Sync() {
	s.mu.Lock()
	fire := s.advanceLocked()
	s.mu.Unlock()
	fire()
}

// Calls returns a copy of the recorded calls.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Creates counts the create calls for the named pool that the server
// accepted (a rejected duplicate is not counted).
func (s *Server) Creates(poolName string) int {
	return s.count("POST", poolName, http.StatusOK)
}

// Deletes counts accepted delete calls for the named pool.
func (s *Server) Deletes(poolName string) int {
	return s.count("DELETE", poolName, http.StatusOK)
}

func (s *Server) count(method, poolName string, status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Method == method && c.Pool == poolName && c.Status == status {
			n++
		}
	}
	return n
}

// Pool returns a copy of the named pool as GKE would return it, on any
// cluster.
func (s *Server) Pool(name string) (container.NodePool, bool) {
	s.Sync()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		if p.np.Name == name {
			return p.np, true
		}
	}
	return container.NodePool{}, false
}

// PoolNames lists the pools that exist, sorted.
func (s *Server) PoolNames() []string {
	s.Sync()
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, p := range s.pools {
		names = append(names, p.np.Name)
	}
	sort.Strings(names)
	return names
}

// --- handlers ---

func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) {
	key := clusterKey(r.PathValue("p"), r.PathValue("l"), r.PathValue("c"))
	s.serve(w, r, "", func() (int, any) {
		c, ok := s.clusters[key]
		if !ok {
			return notFound("cluster", key)
		}
		return http.StatusOK, &container.Cluster{
			Name:       c.Name,
			Location:   c.Location,
			Endpoint:   c.Endpoint,
			Status:     "RUNNING",
			MasterAuth: &container.MasterAuth{ClusterCaCertificate: c.CACertificate},
			SelfLink:   "https://container.googleapis.com/v1/" + key,
		}
	})
}

func (s *Server) createPool(w http.ResponseWriter, r *http.Request) {
	ckey := clusterKey(r.PathValue("p"), r.PathValue("l"), r.PathValue("c"))
	var req container.CreateNodePoolRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.NodePool == nil || req.NodePool.Name == "" {
		s.serve(w, r, "", func() (int, any) { return apiError(400, "INVALID_ARGUMENT", "nodePool.name is required") })
		return
	}
	np := *req.NodePool
	s.serve(w, r, np.Name, func() (int, any) {
		if _, ok := s.clusters[ckey]; !ok {
			return notFound("cluster", ckey)
		}
		pkey := ckey + "/nodePools/" + np.Name
		if _, ok := s.pools[pkey]; ok {
			return apiError(409, "ALREADY_EXISTS", "Already exists: "+pkey+".")
		}
		accels, msg := checkAccelerators(np.Config)
		if msg != "" {
			return apiError(400, "INVALID_ARGUMENT", msg)
		}
		if accels != nil {
			cfg := *np.Config
			cfg.Accelerators = accels
			np.Config = &cfg
		}
		now := s.now()
		p := &pool{cluster: ckey, np: np, readyAt: now.Add(s.createLatency)}
		p.outcome = s.outcomes[""]
		if o, ok := s.outcomes[np.Name]; ok {
			p.outcome = o
		}
		p.np.Status = StatusProvisioning
		p.np.SelfLink = "https://container.googleapis.com/v1/" + pkey
		if ra := reservationAffinity(np.Config); ra != nil && ra.ConsumeReservationType == "SPECIFIC_RESERVATION" && len(ra.Values) == 1 {
			// Hold the reservation's capacity from the start, as GCE does
			// once the instances are requested; a missing or short
			// reservation fails the operation like GKE does.
			rkey := reservationPath(r.PathValue("p"), r.PathValue("l"), ra.Values[0])
			res, ok := s.reservations[rkey]
			switch {
			case !ok:
				p.outcome, p.np.StatusMessage = outcomeFailed, "Reservation "+rkey+" not found or not usable by this node pool."
			case res.SpecificReservation.Count-res.SpecificReservation.InUseCount < np.InitialNodeCount:
				p.outcome, p.np.StatusMessage = outcomeFailed, fmt.Sprintf("Insufficient capacity in reservation %s: requested %d, available %d.", rkey, np.InitialNodeCount, res.SpecificReservation.Count-res.SpecificReservation.InUseCount)
			default:
				res.SpecificReservation.InUseCount += np.InitialNodeCount
				p.reservation = rkey
			}
		}
		if pp := np.PlacementPolicy; pp != nil && pp.PolicyName != "" {
			// GKE refuses a pool whose workload policy does not exist.
			key := policyKey(r.PathValue("p"), regionOf(r.PathValue("l")), pp.PolicyName)
			if _, ok := s.policies[key]; !ok {
				return apiError(400, "INVALID_ARGUMENT", "Resource policy "+key+" was not found.")
			}
		}
		p.createOp = s.newOpLocked(r.PathValue("p"), r.PathValue("l"), OpCreateNodePool, p.np.SelfLink, now)
		if p.outcome != OutcomeHang {
			p.createOp.doneAt = p.readyAt
		}
		s.pools[pkey] = p
		return http.StatusOK, &p.createOp.op
	})
}

// outcomeFailed is an internal outcome for failures decided at create time
// (reservation problems); the message is already on the pool.
const outcomeFailed Outcome = -1

func (s *Server) listPools(w http.ResponseWriter, r *http.Request) {
	ckey := clusterKey(r.PathValue("p"), r.PathValue("l"), r.PathValue("c"))
	s.serve(w, r, "", func() (int, any) {
		if _, ok := s.clusters[ckey]; !ok {
			return notFound("cluster", ckey)
		}
		resp := &container.ListNodePoolsResponse{NodePools: []*container.NodePool{}}
		var keys []string
		for k, p := range s.pools {
			if p.cluster == ckey {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			np := s.pools[k].np
			resp.NodePools = append(resp.NodePools, &np)
		}
		return http.StatusOK, resp
	})
}

func (s *Server) getPool(w http.ResponseWriter, r *http.Request) {
	pkey := clusterKey(r.PathValue("p"), r.PathValue("l"), r.PathValue("c")) + "/nodePools/" + r.PathValue("np")
	s.serve(w, r, r.PathValue("np"), func() (int, any) {
		p, ok := s.pools[pkey]
		if !ok {
			return notFound("node pool", pkey)
		}
		np := p.np
		return http.StatusOK, &np
	})
}

func (s *Server) deletePool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("np")
	pkey := clusterKey(r.PathValue("p"), r.PathValue("l"), r.PathValue("c")) + "/nodePools/" + name
	s.serve(w, r, name, func() (int, any) {
		p, ok := s.pools[pkey]
		if !ok {
			return notFound("node pool", pkey)
		}
		if f := s.deleteFails[name]; f != nil && f.n > 0 {
			f.n--
			return apiError(f.code, statusName(f.code), "Injected delete failure for "+pkey+".")
		}
		if p.createOp != nil && p.createOp.op.Status != OpDone {
			// GKE runs one operation per node pool at a time.
			return apiError(400, "FAILED_PRECONDITION", fmt.Sprintf("Operation %s is currently creating node pool %s. Please wait and try again once it is done.", p.createOp.op.Name, name))
		}
		if p.deleteOp != nil {
			return apiError(400, "FAILED_PRECONDITION", fmt.Sprintf("Operation %s is currently deleting node pool %s. Please wait and try again once it is done.", p.deleteOp.op.Name, name))
		}
		now := s.now()
		p.np.Status = StatusStopping
		p.goneAt = now.Add(s.deleteLatency)
		p.deleteOp = s.newOpLocked(r.PathValue("p"), r.PathValue("l"), OpDeleteNodePool, p.np.SelfLink, now)
		p.deleteOp.doneAt = p.goneAt
		return http.StatusOK, &p.deleteOp.op
	})
}

func (s *Server) getOperation(w http.ResponseWriter, r *http.Request) {
	key := "projects/" + r.PathValue("p") + "/locations/" + r.PathValue("l") + "/operations/" + r.PathValue("op")
	s.serve(w, r, "", func() (int, any) {
		o, ok := s.ops[key]
		if !ok {
			return notFound("operation", key)
		}
		op := o.op
		return http.StatusOK, &op
	})
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) {
	key := reservationKey(r.PathValue("p"), r.PathValue("z"), r.PathValue("r"))
	s.serve(w, r, "", func() (int, any) {
		res, ok := s.reservations[key]
		if !ok {
			return notFound("reservation", key)
		}
		out := *res
		sr := *res.SpecificReservation
		out.SpecificReservation = &sr
		return http.StatusOK, &out
	})
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	key := policyKey(r.PathValue("p"), r.PathValue("r"), r.PathValue("n"))
	s.serve(w, r, "", func() (int, any) {
		p, ok := s.policies[key]
		if !ok {
			return notFound("resource policy", key)
		}
		out := *p
		return http.StatusOK, &out
	})
}

func (s *Server) insertPolicy(w http.ResponseWriter, r *http.Request) {
	var p compute.ResourcePolicy
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Name == "" {
		s.serve(w, r, "", func() (int, any) { return apiError(400, "INVALID_ARGUMENT", "resourcePolicy.name is required") })
		return
	}
	key := policyKey(r.PathValue("p"), r.PathValue("r"), p.Name)
	s.serve(w, r, "", func() (int, any) {
		if _, ok := s.policies[key]; ok {
			return apiError(409, "ALREADY_EXISTS", "The resource '"+key+"' already exists")
		}
		p.SelfLink = "https://compute.googleapis.com/compute/v1/" + key
		p.Region = r.PathValue("r")
		p.Status = "READY"
		s.policies[key] = &p
		return http.StatusOK, &compute.Operation{Name: "operation-" + p.Name, OperationType: "insert", Status: "DONE", TargetLink: p.SelfLink}
	})
}

// ResourcePolicy returns a resource policy (a v7x workload policy).
func (s *Server) ResourcePolicy(project, region, name string) (compute.ResourcePolicy, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.policies[policyKey(project, region, name)]
	if !ok {
		return compute.ResourcePolicy{}, false
	}
	return *p, true
}

func policyKey(project, region, name string) string {
	return "projects/" + project + "/regions/" + region + "/resourcePolicies/" + name
}

// regionOf is the region of a zone (us-central1-a -> us-central1) or a region.
func regionOf(location string) string {
	if strings.Count(location, "-") >= 2 {
		return location[:strings.LastIndex(location, "-")]
	}
	return location
}

// serve advances time, applies injected transient failures, runs h under the
// lock, records the call, writes the JSON answer and then fires the hooks.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, poolName string, h func() (int, any)) {
	s.mu.Lock()
	fire := s.advanceLocked()
	var code int
	var body any
	if len(s.transient) > 0 {
		f := s.transient[0]
		f.n--
		if f.n <= 0 {
			s.transient = s.transient[1:]
		}
		code, body = apiError(f.code, statusName(f.code), "Injected transient failure.")
	} else {
		code, body = h()
	}
	path := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/compute"), "/v1/")
	s.calls = append(s.calls, Call{Method: r.Method, Path: path, Pool: poolName, Status: code})
	s.mu.Unlock()
	fire()

	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// advanceLocked moves pools and operations to the clock's present and
// returns a func that runs the hooks for what changed.
func (s *Server) advanceLocked() func() {
	now := s.now()
	var running, deleted []container.NodePool
	for key, p := range s.pools {
		if p.np.Status == StatusProvisioning && p.outcome != OutcomeHang && !now.Before(p.readyAt) {
			switch p.outcome {
			case OutcomeSucceed:
				p.np.Status = StatusRunning
				p.createOp.finish(nil, now)
				running = append(running, p.np)
			default:
				msg := p.np.StatusMessage
				switch p.outcome {
				case OutcomeQuotaExceeded:
					msg = QuotaMessage
				case OutcomeStockout:
					msg = StockoutMessage
				}
				p.np.Status, p.np.StatusMessage = StatusError, msg
				p.createOp.finish(&container.Status{Code: CodeResourceExhausted, Message: msg}, now)
				s.releaseLocked(p)
			}
		}
		if p.deleteOp != nil && !now.Before(p.goneAt) {
			p.deleteOp.finish(nil, now)
			s.releaseLocked(p)
			delete(s.pools, key)
			deleted = append(deleted, p.np)
		}
	}
	onRunning, onDeleted := s.onRunning, s.onDeleted
	return func() {
		for _, np := range running {
			for _, f := range onRunning {
				f(np)
			}
		}
		for _, np := range deleted {
			for _, f := range onDeleted {
				f(np)
			}
		}
	}
}

func (s *Server) releaseLocked(p *pool) {
	if p.reservation == "" {
		return
	}
	if res, ok := s.reservations[p.reservation]; ok {
		res.SpecificReservation.InUseCount -= p.np.InitialNodeCount
	}
	p.reservation = ""
}

func (s *Server) newOpLocked(project, location, typ, target string, now time.Time) *operation {
	s.opSeq++
	id := fmt.Sprintf("operation-%d-%08x", now.UnixMilli(), s.opSeq)
	o := &operation{op: container.Operation{
		Name:          id,
		OperationType: typ,
		Status:        OpRunning,
		Location:      location,
		SelfLink:      "https://container.googleapis.com/v1/projects/" + project + "/locations/" + location + "/operations/" + id,
		TargetLink:    target,
		StartTime:     now.UTC().Format(time.RFC3339Nano),
	}}
	s.ops["projects/"+project+"/locations/"+location+"/operations/"+id] = o
	return o
}

func (o *operation) finish(errStatus *container.Status, now time.Time) {
	if o.op.Status == OpDone {
		return
	}
	o.op.Status = OpDone
	o.op.EndTime = now.UTC().Format(time.RFC3339Nano)
	if errStatus != nil {
		o.op.Error = errStatus
		o.op.StatusMessage = errStatus.Message
	}
}

// --- wire helpers ---

type errorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

func apiError(code int, status, msg string) (int, any) {
	var b errorBody
	b.Error.Code, b.Error.Status, b.Error.Message = code, status, msg
	return code, &b
}

func notFound(kind, key string) (int, any) {
	return apiError(404, "NOT_FOUND", fmt.Sprintf("Not found: %s %q.", kind, key))
}

func statusName(code int) string {
	switch {
	case code == 400:
		return "FAILED_PRECONDITION"
	case code == 403:
		return "PERMISSION_DENIED"
	case code == 429:
		return "RESOURCE_EXHAUSTED"
	case code == 503:
		return "UNAVAILABLE"
	default:
		return "INTERNAL"
	}
}

func clusterKey(project, location, name string) string {
	return "projects/" + project + "/locations/" + location + "/clusters/" + name
}

func reservationKey(project, zone, name string) string {
	return "projects/" + project + "/zones/" + zone + "/reservations/" + name
}

// reservationPath resolves a reservation-affinity value: a bare name is a
// reservation in the cluster's project and zone; "projects/P/reservations/R"
// names a shared one in the same zone.
func reservationPath(project, zone, value string) string {
	if rest, ok := strings.CutPrefix(value, "projects/"); ok {
		if p, r, ok := strings.Cut(rest, "/reservations/"); ok {
			return reservationKey(p, zone, r)
		}
	}
	return reservationKey(project, zone, value)
}

func reservationAffinity(c *container.NodeConfig) *container.ReservationAffinity {
	if c == nil {
		return nil
	}
	return c.ReservationAffinity
}
