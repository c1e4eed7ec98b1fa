package resourcemanager

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// deck hands a queue's slot over without waiting for a cycle. A cycle
// that picks a job for a slot also picks the one after it (Reserve) where
// the next job needs nothing but its submission, and records it Next with
// its cluster. From then on the handover needs no write first: when a
// backend reports a change of the slot's holder (Touch), the deck asks the
// backend what the holder's pods do (Observe, from the informer's cache)
// and, if they run or the job ended (releases), hands the job on deck to
// the submitter at once. The cycle that the same report wakes records the
// holder's news and the pick (Next → Dispatching) in one write, finds the
// submission in flight or returned, and decides on its outcome as on any
// other (dispatch).
//
// It is safe because everything it could start is on the record first: the
// row of a job on deck names its cluster, so a controller that dies after
// the create and before the write finds the job Next on that cluster, seats
// it on deck again and dispatches it there (Dispatch is idempotent); it is
// never placed elsewhere (lifecycle.PendingPhases). And the cycle drops a
// job from the deck before it acts on it otherwise (an abort, a failure,
// its experiment deleted) or on its holder: after the drop nothing more
// can start, and a start made before it is a submission in flight, which
// the cycle waits for as for any other.
//
// The deck is memory (see memory): a restart loses it, and the first
// cycle, a resync, sets it again from the rows.
type deck struct {
	mu sync.Mutex
	// byHolder is each waiting handover, by the ID of the slot's holder.
	byHolder map[string]*handover
	// ctx is Run's, for the looks and submissions the deck starts; nil
	// until Run opens the deck, so a bare Reconcile hands nothing over.
	ctx    context.Context
	closed bool // draining: nothing more starts (Manager.finish)
	wg     sync.WaitGroup
	// gauge is told how many handovers wait, after every change.
	gauge func(n int)
}

// handover is one queue's next job, waiting for the slot's holder to
// release it.
type handover struct {
	holder, next *falconv1.Job // copies, for the goroutines that use them
	cluster      *falconv1.Cluster
	backend      Backend
	configRead   bool // see memory.configRead
	looking           // the look at the holder in flight, if any
	// reported is when the last report of the holder came (Touch): the
	// start of the handover a look that finds the slot released makes.
	reported time.Time
}

func newDeck(gauge func(n int)) *deck {
	return &deck{byHolder: map[string]*handover{}, gauge: gauge}
}

// open lets the deck hand slots over, under Run's context.
func (d *deck) open(ctx context.Context) {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
}

// set records that next takes holder's slot when it is released. A deck
// not open, or closed, records nothing.
func (d *deck) set(holder, next *falconv1.Job, cl *falconv1.Cluster, b Backend, configRead bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == nil || d.closed {
		return
	}
	if h := d.byHolder[holder.GetId()]; h != nil && h.next.GetId() == next.GetId() {
		return
	}
	d.byHolder[holder.GetId()] = &handover{holder: cloneJob(holder), next: cloneJob(next), cluster: cl, backend: b, configRead: configRead}
	d.gauge(len(d.byHolder))
}

// drop forgets every handover that id takes part in, as holder or as next.
// After it returns no submission of that handover starts.
func (d *deck) drop(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer func() { d.gauge(len(d.byHolder)) }()
	if _, ok := d.byHolder[id]; ok {
		delete(d.byHolder, id)
		return
	}
	for holder, h := range d.byHolder {
		if h.next.GetId() == id {
			delete(d.byHolder, holder)
			return
		}
	}
}

// touched starts a look at the holders among ids, reported at now.
// observe says whether a holder released its slot; start is called, under
// the deck's lock, for each handover whose holder did, unless it was
// dropped meanwhile, with the time of the report the look answered.
func (d *deck) touched(ids []string, now time.Time, observe func(context.Context, *handover) bool, start func(context.Context, *handover, time.Time)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		h := d.byHolder[id]
		if h == nil || d.closed {
			continue
		}
		h.reported = now
		if !h.start() {
			continue
		}
		ctx, answers := d.ctx, h.reported
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for {
				released := observe(ctx, h)
				d.mu.Lock()
				if d.byHolder[h.holder.GetId()] != h || d.closed {
					d.mu.Unlock()
					return // dropped meanwhile: the cycle has it
				}
				if released {
					delete(d.byHolder, h.holder.GetId())
					d.gauge(len(d.byHolder))
					start(ctx, h, answers)
					d.mu.Unlock()
					return
				}
				more := h.more()
				answers = h.reported
				d.mu.Unlock()
				if !more {
					return
				}
			}
		}()
	}
}

// dropCluster forgets the handovers on a cluster that takes no new job
// now (out of service, or backing off): their jobs wait on deck for the
// cycle, which picks them when the cluster takes jobs again.
func (d *deck) dropCluster(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for holder, h := range d.byHolder {
		if h.cluster.GetName() == name {
			delete(d.byHolder, holder)
		}
	}
	d.gauge(len(d.byHolder))
}

// close stops every handover from starting and waits for the looks in
// flight: the drain (Manager.finish) then waits for what was started.
func (d *deck) close() {
	d.mu.Lock()
	d.closed = true
	clear(d.byHolder)
	d.gauge(0)
	d.mu.Unlock()
	d.wg.Wait()
}

func cloneJob(j *falconv1.Job) *falconv1.Job { return proto.Clone(j).(*falconv1.Job) }

// reserveAll picks ahead, in every queue whose slot is held and where
// planReserve allows it, the job that takes the slot next, and returns the
// writes that record it Next with its cluster, for the pick's flush. Only
// under Run: a bare Reconcile has no deck to hand the slot over.
func (m *Manager) reserveAll(c *cycle, byID map[string]*falconv1.Job) (jobs []*falconv1.Job, reqs []*falconv1.UpdateJobStatusRequest) {
	if m.sub == nil || m.closing {
		return nil, nil
	}
	for _, key := range m.mem.sched.Reservable() {
		b, err := m.backendFor(c.clusters[key.Cluster])
		if err != nil {
			continue
		}
		_, pooled := b.(PoolBackend)
		_, starts := b.(Starter)
		if !planReserve(reserveFacts{pooled: pooled, starts: starts, cpu: key.Topology == "cpu",
			outOfService: m.outOfService(c, key.Cluster), backoff: c.health[key.Cluster].Backoff}) {
			continue
		}
		holder, _ := m.mem.sched.Holder(key)
		sj, ok := m.mem.sched.Reserve(key)
		if !ok {
			continue
		}
		m.mem.touched[key] = true
		j := byID[sj.ID]
		if j == nil {
			_ = m.mem.sched.Remove(sj.ID)
			continue
		}
		delete(m.mem.positions, j.GetId())
		req := m.pickRequest(j, key.Cluster, lifecycle.ReasonNext,
			fmt.Sprintf("next in line on cluster %s: submitted the moment %s: %s runs", key.Cluster, holder.Actor, cmp.Or(holder.Name, holder.ID)))
		jobs, reqs = append(jobs, j), append(reqs, req)
	}
	return jobs, reqs
}

// deckAll puts on the deck the jobs whose Next was written. One whose
// write did not land stays on deck in the scheduler's memory only: the
// next cycle reads its row again (an abort takes it out; a pick records
// Dispatching from whatever its row says).
func (m *Manager) deckAll(c *cycle, jobs []*falconv1.Job) {
	for _, j := range jobs {
		if j.GetReason() == string(lifecycle.ReasonNext) {
			m.mem.configRead[j.GetId()] = true
			m.arm(c, j)
		}
	}
}

// armDeck puts on the deck every job seated there whose row says Next and
// whose holder is known: on a resync, after a restart above all, when the
// rows are all the manager has.
func (m *Manager) armDeck(c *cycle) {
	for _, j := range c.all {
		if j.GetStatus() == string(lifecycle.Pending) && j.GetReason() == string(lifecycle.ReasonNext) {
			m.arm(c, j)
		}
	}
}

// arm hands the deck the job on deck j and its queue's holder, if the
// holder acquires and neither was submitted by the deck already.
func (m *Manager) arm(c *cycle, j *falconv1.Job) {
	key, phase, ok := m.mem.sched.Lookup(j.GetId())
	if !ok || phase != queue.PhaseOnDeck || m.sub.has(j.GetId()) {
		return
	}
	if m.outOfService(c, key.Cluster) != "" || c.health[key.Cluster].Backoff {
		return // see dropCluster
	}
	h, ok := m.mem.sched.Holder(key)
	if !ok {
		return
	}
	holder := m.snap.jobs[h.ID]
	cl := c.clusters[key.Cluster]
	b, err := m.backendFor(cl)
	if holder == nil || !acquiring(holder) || err != nil {
		return
	}
	m.deck.set(holder, j, cl, b, m.mem.configRead[j.GetId()])
}

// seatOnDeck puts a job whose row says Next back on its queue's deck (the
// first cycle after a restart): on the cluster its row names and nowhere
// else, since that cluster may hold its Job already.
func (m *Manager) seatOnDeck(ctx context.Context, c *cycle, j *falconv1.Job) {
	key := queue.Key{Cluster: j.GetClusterName(), Topology: queueKey(j)}
	if c.clusters[key.Cluster] == nil {
		// It may not go elsewhere, and nothing can bring it forward there.
		m.fail(ctx, j, recorded(lifecycle.Failed, lifecycle.ReasonJobSubmitFailed, fmt.Sprintf("cluster %s is no longer registered (deleted while the job was next in line there)", key.Cluster)))
		return
	}
	if _, _, ok := m.mem.sched.Lookup(j.GetId()); ok {
		return
	}
	m.mem.touched[key] = true
	if err := m.mem.sched.MarkOnDeck(schedJob(j), key); err != nil {
		// Another job is on deck there: this one waits behind it in the
		// same queue, keeping its row's Next (planPositions).
		if err := m.mem.sched.Add(schedJob(j), key); err != nil {
			m.log.Warn("seat job picked ahead", "job", j.GetId(), "cluster", key.Cluster, "err", err)
		}
	}
}

// released asks the holder's backend whether the holder released its
// slot (the deck's look, outside any cycle).
func (m *Manager) released(ctx context.Context, h *handover) bool {
	obs, err := h.backend.Observe(ctx, h.cluster, h.holder)
	return err == nil && releases(obs)
}

// startNext hands the job on deck to the submitter: the handover, which
// began when the holder's release was reported.
func (m *Manager) startNext(ctx context.Context, h *handover, reported time.Time) {
	m.metrics.HandedAhead.Inc()
	m.log.Debug("slot handed over ahead of the cycle", "job", h.next.GetId(), "after", h.holder.GetId(), "cluster", h.cluster.GetName())
	m.startSubmission(ctx, h.cluster, h.backend, h.next, h.configRead, reported)
}

// submitAhead submits a job the cycle picked from the deck before the
// write that records the pick, as the deck would have: its row names its
// cluster already. Only under Run (the submitter), and not if the deck
// submitted it already.
func (m *Manager) submitAhead(ctx context.Context, c *cycle, j *falconv1.Job) {
	cl := c.clusters[j.GetClusterName()]
	b, err := m.backendFor(cl)
	if m.sub == nil || err != nil || m.sub.has(j.GetId()) {
		return
	}
	m.startSubmission(ctx, cl, b, cloneJob(j), m.mem.configRead[j.GetId()], time.Time{})
}

// startSubmission hands j's submission to the submitter. configRead: the
// write that recorded it Next brought its config back (memory.configRead);
// a row read from a list (after a restart) lacks it, and submit reads it.
// reported, for a handover, is when the holder's release was reported:
// the handover's two times are measured from it (metrics.HandoverSeconds).
func (m *Manager) startSubmission(ctx context.Context, cl *falconv1.Cluster, b Backend, j *falconv1.Job, configRead bool, reported time.Time) {
	m.sub.start(ctx, cl.GetName(), j.GetId(), func(ctx context.Context) error {
		if !reported.IsZero() {
			m.metrics.HandoverSeconds.WithLabelValues("sent").Observe(m.now().Sub(reported).Seconds())
		}
		err := m.submit(ctx, cl, b, j, configRead)
		if err == nil && !reported.IsZero() {
			m.metrics.HandoverSeconds.WithLabelValues("created").Observe(m.now().Sub(reported).Seconds())
		}
		return err
	})
}
