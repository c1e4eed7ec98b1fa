package metrics

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// RM is the resource manager's metrics.
type RM struct {
	Cycles       prometheus.Counter
	CycleErrors  prometheus.Counter
	CycleSeconds prometheus.Histogram
	CycleJobs    prometheus.Histogram
	// Dispatched counts jobs that reached Running, per cluster.
	Dispatched *prometheus.CounterVec
	// DispatchLatency is created -> Running (queueing plus acquiring).
	DispatchLatency *prometheus.HistogramVec
	// Finished counts jobs that ended, by cluster, status and reason.
	Finished *prometheus.CounterVec
	// HandedAhead counts slots handed to the job on deck the moment the
	// holder's cluster reported it released them, before any cycle.
	HandedAhead prometheus.Counter
	// HandoversWaiting is how many jobs picked ahead wait for their
	// queue's holder to release the slot.
	HandoversWaiting prometheus.Gauge
	// HandoverSeconds times the deck's handovers from the report that the
	// holder released its slot: until the next job's submission is sent
	// to its backend ("sent", Falcon's own part) and until its Kubernetes
	// Job exists ("created", the cluster's answer included).
	HandoverSeconds *prometheus.HistogramVec
	// EndsAhead counts Running jobs recorded Succeeded the moment their
	// cluster reported it, before any cycle.
	EndsAhead prometheus.Counter
	// Queue depth and the acquiring slot, per (cluster, queue). A queue is
	// named by what its jobs compete for: a TPU slice topology (2x2x4), a
	// GPU type and GPUs per host (nvidia-h100-80gb:8), or cpu.
	QueueWaiting   *prometheus.GaugeVec
	QueueAcquiring *prometheus.GaugeVec
	// ClusterUnreachable is 1 while the cluster's backend fails to reach
	// it, per cluster.
	ClusterUnreachable *prometheus.GaugeVec
	// Node pools by cluster and state, and what happened to them.
	NodePools   *prometheus.GaugeVec
	PoolCreates *prometheus.CounterVec // by cluster, reason (Provisioning, ProvisioningFallback)
	PoolReuses  *prometheus.CounterVec // by cluster
	PoolDeletes *prometheus.CounterVec // by cluster, outcome (started, busy, failed)
	// ReservationNodes is the cluster's default reservation, by state
	// (in_use, free), as the Compute API last reported it.
	ReservationNodes *prometheus.GaugeVec
}

// NewRM creates the resource manager's metrics and registers them on reg.
func NewRM(reg prometheus.Registerer) *RM {
	m := &RM{
		Cycles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "falcon_rm_cycles_total", Help: "Reconcile cycles run by the resource manager.",
		}),
		CycleErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "falcon_rm_cycle_errors_total", Help: "Reconcile cycles that could not read the API server.",
		}),
		CycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "falcon_rm_cycle_seconds", Help: "Duration of one reconcile cycle.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1ms .. 8s
		}),
		CycleJobs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "falcon_rm_cycle_jobs", Help: "Jobs one reconcile cycle looked at: those that changed, were reported by a backend or were due, or every live job on a resync.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1 .. 262144
		}),
		Dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "falcon_jobs_running_total", Help: "Jobs whose replicas all started, by cluster.",
		}, []string{"cluster"}),
		DispatchLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "falcon_job_dispatch_latency_seconds", Help: "From a job's creation until all its replicas run (queueing, node pool, scheduling).",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16), // 100ms .. ~55m
		}, []string{"cluster"}),
		HandedAhead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "falcon_rm_handovers_ahead_total", Help: "Queue slots handed to the job picked ahead (Next) as soon as the holder's pods ran or it ended, without waiting for a cycle.",
		}),
		HandoversWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "falcon_rm_handovers_waiting", Help: "Jobs picked ahead (Next) whose handover waits for their queue's holder to run or end.",
		}),
		HandoverSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "falcon_rm_handover_seconds", Help: "Slot handovers made ahead of the cycle, from the report that the holder's pods ran or it ended: until the next job's submission was sent (until=sent) and until its Kubernetes Job was created (until=created).",
			// Fine around the 50 ms the handover is held to.
			Buckets: []float64{.001, .002, .003, .005, .0075, .01, .015, .02, .03, .05, .075, .1, .15, .2, .3, .5, .75, 1, 2, 5},
		}, []string{"until"}),
		EndsAhead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "falcon_rm_ends_ahead_total", Help: "Running jobs recorded Succeeded as soon as their cluster reported it, without waiting for a cycle.",
		}),
		Finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "falcon_jobs_finished_total", Help: "Jobs that ended, by cluster, status and reason.",
		}, []string{"cluster", "status", "reason"}),
		QueueWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "falcon_queue_waiting_jobs", Help: "Jobs waiting in each (cluster, queue) queue; queue is a TPU topology, <gpu type>:<gpus per host>, or cpu.",
		}, []string{"cluster", "queue"}),
		QueueAcquiring: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "falcon_queue_acquiring_jobs", Help: "1 while a job holds the queue's slot (provisioning or dispatching).",
		}, []string{"cluster", "queue"}),
		ClusterUnreachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "falcon_cluster_unreachable", Help: "1 while the resource manager cannot reach the cluster's API server.",
		}, []string{"cluster"}),
		NodePools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "falcon_node_pools", Help: "Falcon's node pools, by cluster and state (owned, idle, provisioning, deleting, failed).",
		}, []string{"cluster", "state"}),
		PoolCreates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "falcon_node_pool_creates_total", Help: "Node pools requested for jobs, by cluster and reason.",
		}, []string{"cluster", "reason"}),
		PoolReuses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "falcon_node_pool_reuses_total", Help: "Jobs given a pool that was not created for them.",
		}, []string{"cluster"}),
		PoolDeletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "falcon_node_pool_deletes_total", Help: "Node pool deletions, by cluster and outcome (started, busy, failed).",
		}, []string{"cluster", "outcome"}),
		ReservationNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "falcon_reservation_nodes", Help: "Nodes of each cluster's default reservation, by state (in_use, free), as last read from the Compute API.",
		}, []string{"cluster", "reservation", "state"}),
	}
	reg.MustRegister(m.ReservationNodes, m.Cycles, m.CycleErrors, m.CycleSeconds, m.CycleJobs, m.Dispatched, m.DispatchLatency, m.Finished, m.HandedAhead, m.HandoversWaiting, m.HandoverSeconds, m.EndsAhead,
		m.QueueWaiting, m.QueueAcquiring, m.ClusterUnreachable, m.NodePools, m.PoolCreates, m.PoolReuses, m.PoolDeletes)
	// Series whose labels are known ahead are exported from the start, at
	// zero, so a query (a dashboard's, an alert's) finds them before the
	// first handover: a deck whose handovers the cycles all took first
	// would otherwise never export one.
	for _, until := range []string{"sent", "created"} {
		m.HandoverSeconds.WithLabelValues(until)
	}
	return m
}

// Store is the database's metrics, as the store's transactions see them.
type Store struct {
	// TxSeconds times each transaction attempt by lane ("jobs" for a job
	// status write, "other") and phase: "wait", until it could begin
	// (SQLite's one writer is taken in turn, job writes first; on MySQL, a
	// pooled connection), and "run", from its begin to its commit or
	// rollback.
	TxSeconds *prometheus.HistogramVec
	// series are TxSeconds' series by lane and phase, looked up once:
	// every transaction observes two.
	series map[string][2]prometheus.Observer
}

// NewStore creates the store's metrics and registers them on reg.
func NewStore(reg prometheus.Registerer) *Store {
	m := &Store{
		TxSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "falcon_store_transaction_seconds",
			Help: "Database transactions: the wait until each could begin (phase=wait; SQLite has one writer, which job status writes, lane=jobs, take ahead of the others, lane=other) and its run until commit or rollback (phase=run).",
			// From a free writer's microseconds to writers queued for a
			// second behind one another.
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
		}, []string{"lane", "phase"}),
		series: map[string][2]prometheus.Observer{},
	}
	reg.MustRegister(m.TxSeconds)
	// Exported from the start, at zero.
	for _, lane := range []string{"jobs", "other"} {
		m.series[lane] = [2]prometheus.Observer{m.TxSeconds.WithLabelValues(lane, "wait"), m.TxSeconds.WithLabelValues(lane, "run")}
	}
	return m
}

// ObserveTx records one transaction attempt (sqlstore.WithTxObserver).
func (m *Store) ObserveTx(lane string, wait, run time.Duration) {
	s, ok := m.series[lane]
	if !ok {
		s = [2]prometheus.Observer{m.TxSeconds.WithLabelValues(lane, "wait"), m.TxSeconds.WithLabelValues(lane, "run")}
	}
	s[0].Observe(wait.Seconds())
	s[1].Observe(run.Seconds())
}

// NewRegistry returns a registry with the Go runtime and process
// collectors, the usual companions of an application's own metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewLeader creates falcon_leader, 1 while this controller replica leads
// and reconciles, 0 while it stands by, and registers it on reg. Summed
// over replicas it must be 1.
func NewLeader(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "falcon_leader", Help: "1 while this controller replica is the elected leader and runs the reconcile loops, 0 while it stands by.",
	})
	reg.MustRegister(g)
	return g
}

// Handler serves /metrics from g, /healthz (the process answers) and
// /readyz: 200 "ok: <role>" when ready returns a nil error, where role
// says what the process is doing (a controller answers "leader" or
// "standby"), and 503 with the error otherwise.
func Handler(g prometheus.Gatherer, ready func() (role string, err error)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		role, err := ready()
		if err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok: " + role + "\n"))
	})
	return mux
}

// GaugeSet keeps a GaugeVec's series to exactly those set in the last
// round, for gauges that describe a view rebuilt every cycle (queues, pools,
// clusters). Unlike Reset followed by setting every series again, a scrape
// in the middle of a round never sees a series missing, and a series that
// stays is not created anew each round. Not safe for concurrent rounds.
type GaugeSet struct {
	vec       *prometheus.GaugeVec
	prev, cur map[string][]string // the labels of each series, by their join
}

// NewGaugeSet returns a GaugeSet over vec.
func NewGaugeSet(vec *prometheus.GaugeVec) *GaugeSet {
	return &GaugeSet{vec: vec, prev: map[string][]string{}, cur: map[string][]string{}}
}

// Set sets the series of labels to v in this round.
func (g *GaugeSet) Set(v float64, labels ...string) {
	g.vec.WithLabelValues(labels...).Set(v)
	k := strings.Join(labels, "\xff")
	if _, ok := g.cur[k]; !ok {
		g.cur[k] = labels
	}
}

// Flush ends the round: the series set in the previous round and not in
// this one are deleted.
func (g *GaugeSet) Flush() {
	for k, labels := range g.prev {
		if _, ok := g.cur[k]; !ok {
			g.vec.DeleteLabelValues(labels...)
		}
	}
	g.prev, g.cur = g.cur, g.prev
	clear(g.cur)
}
