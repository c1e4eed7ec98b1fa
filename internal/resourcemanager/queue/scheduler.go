package queue

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Key names one queue.
type Key struct {
	Cluster string
	// Topology names the queue within the cluster by what its jobs compete
	// for: a TPU slice topology ("2x2x4"), or whatever the caller groups
	// other jobs by ("nvidia-h100-80gb:8", "cpu").
	Topology string
}

func (k Key) String() string { return k.Cluster + "/" + k.Topology }

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Topology, b.Topology))
}

// Job is what the scheduler needs to know of a job waiting for a slice.
type Job struct {
	ID              string
	Actor           string // the user who submitted it; the unit of round-robin
	Name            string // shown to other users in Waiting messages
	AcceleratorType string // e.g. "v7x"
	Topology        string // the queue within a cluster, e.g. "2x2x4" (see Key)
	// Shape is the node pool shape the job runs on (a TPU topology, a GPU
	// host count and GPUs per host: accelerator.Slice.PoolShape), matched
	// against Cluster.IdlePools; empty is Topology. The queue key and the
	// pool shape differ: a queue key names its type too (v5p:2x2x2), and
	// GPU jobs of one GPU count share a queue whatever their hosts.
	Shape         string
	PinnedCluster string // if set, the only cluster the job may run in
	// Created orders the job within its actor's FIFO; the ID breaks ties.
	Created time.Time
}

// Ref identifies a job in positions and messages.
type Ref struct {
	ID, Actor, Name string
}

// Phase is where a job is inside the scheduler.
type Phase string

const (
	PhaseWaiting   Phase = "Waiting"
	PhaseAcquiring Phase = "Acquiring" // holds its queue's slot (Provisioning or Dispatching)
	// PhaseOnDeck: picked ahead (Reserve) while another job holds the
	// slot; the next Pick of its queue hands it the slot.
	PhaseOnDeck Phase = "OnDeck"
)

// entry is one job in the scheduler.
type entry struct {
	job   Job
	key   Key
	rank  rank
	actor *fifo      // while waiting; nil once on deck or acquiring
	since time.Time  // when it started acquiring, by the scheduler's clock
	sel   *Selection // the record of placing it, when EnqueueExplained did
}

func newEntry(job Job, key Key) *entry {
	return &entry{job: job, key: key, rank: rank{created: job.Created.UnixNano(), id: job.ID}}
}

func (e *entry) ref() Ref { return Ref{ID: e.job.ID, Actor: e.job.Actor, Name: e.job.Name} }

// Scheduler holds every queue. It is safe for concurrent use; all methods
// are cheap enough to run under one mutex.
type Scheduler struct {
	mu         sync.Mutex
	now        func() time.Time
	aheadLimit int
	jobs       map[string]*entry
	queues     map[Key]*queue // never deleted: a queue remembers its last-served actor
}

// Option configures a Scheduler.
type Option func(*Scheduler)

// WithClock injects the clock that stamps when a job starts acquiring.
func WithClock(now func() time.Time) Option { return func(s *Scheduler) { s.now = now } }

// WithAheadLimit sets how many jobs ahead a Waiting message lists by name
// before summarizing the rest as "and N more" (default 5).
func WithAheadLimit(n int) Option { return func(s *Scheduler) { s.aheadLimit = max(n, 0) } }

// New returns an empty Scheduler.
func New(opts ...Option) *Scheduler {
	s := &Scheduler{
		now:        time.Now,
		aheadLimit: 5,
		jobs:       make(map[string]*entry),
		queues:     make(map[Key]*queue),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Scheduler) queue(k Key) *queue {
	q := s.queues[k]
	if q == nil {
		q = &queue{key: k, actors: make(map[string]*fifo)}
		s.queues[k] = q
	}
	return q
}

func validateJob(j Job) error {
	switch {
	case j.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalid)
	case j.Actor == "":
		return fmt.Errorf("%w: job %s: empty actor", ErrInvalid, j.ID)
	case j.AcceleratorType == "":
		return fmt.Errorf("%w: job %s: empty accelerator type", ErrInvalid, j.ID)
	case j.Topology == "":
		return fmt.Errorf("%w: job %s: empty topology", ErrInvalid, j.ID)
	case j.Created.IsZero():
		return fmt.Errorf("%w: job %s: zero creation time", ErrInvalid, j.ID)
	}
	return nil
}

func validate(j Job, k Key) error {
	if err := validateJob(j); err != nil {
		return err
	}
	switch {
	case k.Cluster == "":
		return fmt.Errorf("%w: job %s: empty cluster in key", ErrInvalid, j.ID)
	case k.Topology != j.Topology:
		return fmt.Errorf("%w: job %s has topology %s but key is %s", ErrInvalid, j.ID, j.Topology, k)
	case j.PinnedCluster != "" && j.PinnedCluster != k.Cluster:
		return fmt.Errorf("%w: job %s is pinned to %s but key is %s", ErrInvalid, j.ID, j.PinnedCluster, k)
	}
	return nil
}

// Add puts a waiting job in the queue for key, typically one returned by
// Select. It is idempotent on the job ID: adding a job that is already in
// that queue, waiting or acquiring, does nothing (the first Add's fields are
// kept), which lets a level-triggered caller re-add every Pending job each
// cycle. Adding it under another key is ErrConflict; Remove it first to move
// it.
func (s *Scheduler) Add(job Job, key Key) error {
	if err := validate(job, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(job, key)
}

func (s *Scheduler) addLocked(job Job, key Key) error {
	if e, ok := s.jobs[job.ID]; ok {
		if e.key != key {
			return fmt.Errorf("%w: job %s is in queue %s, not %s", ErrConflict, job.ID, e.key, key)
		}
		return nil
	}
	e := newEntry(job, key)
	s.jobs[job.ID] = e
	s.queue(key).push(e)
	return nil
}

// Enqueue places a job that is not queued yet (Select, then Add) and returns
// its key. A job already queued keeps its key, so calling Enqueue for every
// Pending job each cycle is safe. If no cluster fits, the error is an
// *UnplaceableError and the job stays unassigned.
func (s *Scheduler) Enqueue(job Job, clusters []Cluster) (Key, error) {
	k, _, err := s.EnqueueExplained(job, clusters, PolicySpread)
	return k, err
}

// EnqueueExplained is Enqueue under policy p, returning the decision record
// of a job it placed now (SelectExplained's). A job already queued keeps
// its key and gets a zero Selection: it was decided before.
func (s *Scheduler) EnqueueExplained(job Job, clusters []Cluster, p Policy) (Key, Selection, error) {
	if err := validateJob(job); err != nil {
		return Key{}, Selection{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.jobs[job.ID]; ok {
		return e.key, Selection{}, nil
	}
	sel, err := Explain(job, clusters, s.depthLocked, p, s.now())
	if err != nil {
		return Key{}, sel, err
	}
	k := sel.Key()
	if err := s.addLocked(job, k); err != nil {
		return k, sel, err
	}
	s.jobs[job.ID].sel = &sel
	return k, sel, nil
}

// MarkAcquiring records that job already holds key's slot. It exists for
// rebuilding after a restart, for jobs whose rows say Provisioning or
// Dispatching. The job may be new or already waiting in that queue. Since
// the slot's holder was the last actor served there, it also restores the
// queue's round-robin memory. Marking a job that already holds the slot does
// nothing; if another job holds it, the error is ErrSlotBusy.
func (s *Scheduler) MarkAcquiring(job Job, key Key) error {
	if err := validate(job, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue(key)
	e, ok := s.jobs[job.ID]
	switch {
	case ok && e.key != key:
		return fmt.Errorf("%w: job %s is in queue %s, not %s", ErrConflict, job.ID, e.key, key)
	case ok && q.acquiring == e:
		return nil
	case q.acquiring != nil:
		return fmt.Errorf("%w: %s is held by job %s, cannot mark %s", ErrSlotBusy, key, q.acquiring.job.ID, job.ID)
	case ok && q.onDeck == e:
		q.onDeck = nil
	case ok:
		q.unlink(e)
	default:
		e = newEntry(job, key)
		s.jobs[job.ID] = e
	}
	q.acquiring, e.since, q.lastServed = e, s.now(), e.job.Actor
	q.invalidate()
	return nil
}

// Pick hands key's free slot to the next job and returns it: the job on
// deck if there is one (Reserve), else the next by the pick rule. The job
// is then acquiring and its actor is the queue's last served. It returns
// false if the slot is taken or nobody is waiting. Cost: O(log
// jobs-of-actor + log actors).
func (s *Scheduler) Pick(key Key) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil || q.acquiring != nil {
		return Job{}, false
	}
	e := q.onDeck
	if e != nil {
		q.onDeck = nil
	} else if e = q.takeFront(); e == nil {
		return Job{}, false
	}
	q.acquiring, e.since = e, s.now()
	return e.job, true
}

// Reserve picks key's next job ahead, while another job holds the slot: by
// the pick rule, as Pick would, making its actor the last served. The job
// is then on deck: no longer waiting, not holding the slot, and the next
// Pick of the queue hands it the slot before anyone waiting. It returns
// false if the slot is free (Pick instead), a job is on deck already, or
// nobody is waiting.
func (s *Scheduler) Reserve(key Key) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil || q.acquiring == nil || q.onDeck != nil {
		return Job{}, false
	}
	e := q.takeFront()
	if e == nil {
		return Job{}, false
	}
	q.onDeck = e
	return e.job, true
}

// MarkOnDeck records that job was picked ahead in key (its row says so),
// for rebuilding after a restart as MarkAcquiring does for the slot's
// holder. The job may be new or already waiting in that queue; marking the
// job on deck again does nothing. If another job is on deck the error is
// ErrSlotBusy; if the job holds the slot, ErrConflict.
func (s *Scheduler) MarkOnDeck(job Job, key Key) error {
	if err := validate(job, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue(key)
	e, ok := s.jobs[job.ID]
	switch {
	case ok && e.key != key:
		return fmt.Errorf("%w: job %s is in queue %s, not %s", ErrConflict, job.ID, e.key, key)
	case ok && q.onDeck == e:
		return nil
	case ok && q.acquiring == e:
		return fmt.Errorf("%w: job %s holds the slot of %s", ErrConflict, job.ID, key)
	case q.onDeck != nil:
		return fmt.Errorf("%w: job %s is on deck in %s, cannot mark %s", ErrSlotBusy, q.onDeck.job.ID, key, job.ID)
	case ok:
		q.unlink(e)
		q.invalidate()
	default:
		e = newEntry(job, key)
		s.jobs[job.ID] = e
	}
	q.onDeck, q.lastServed = e, e.job.Actor
	q.invalidate()
	return nil
}

// Holder returns the job holding key's slot, false if the slot is free.
func (s *Scheduler) Holder(key Key) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[key]; q != nil && q.acquiring != nil {
		return q.acquiring.job, true
	}
	return Job{}, false
}

// Release frees the slot held by jobID, whose pods are all Running, and
// forgets the job: a running job no longer occupies its queue. A waiting job
// is ErrNotAcquiring; an unknown one ErrNotFound.
func (s *Scheduler) Release(jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[jobID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	q := s.queues[e.key]
	if q.acquiring != e {
		return fmt.Errorf("%w: %s is waiting in %s", ErrNotAcquiring, jobID, e.key)
	}
	q.acquiring = nil
	delete(s.jobs, jobID)
	return nil
}

// Remove forgets a job that ended (failed, aborted, timed out) whether it
// was waiting or acquiring; an acquiring job frees its slot. An unknown job
// is ErrNotFound.
func (s *Scheduler) Remove(jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[jobID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	q := s.queues[e.key]
	switch {
	case q.acquiring == e:
		q.acquiring = nil
	case q.onDeck == e:
		q.onDeck = nil
		q.invalidate() // positions count it ahead
	default:
		q.unlink(e)
		q.invalidate()
	}
	delete(s.jobs, jobID)
	return nil
}

// Lookup reports which queue holds jobID and in which phase.
func (s *Scheduler) Lookup(jobID string) (Key, Phase, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[jobID]
	if !ok {
		return Key{}, "", false
	}
	switch q := s.queues[e.key]; e {
	case q.acquiring:
		return e.key, PhaseAcquiring, true
	case q.onDeck:
		return e.key, PhaseOnDeck, true
	}
	return e.key, PhaseWaiting, true
}

// LastServed returns the actor who got key's most recent slot, "" if none is
// known. Persist it if the one-turn fairness blip after a restart matters.
func (s *Scheduler) LastServed(key Key) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[key]; q != nil {
		return q.lastServed
	}
	return ""
}

// SetLastServed restores key's round-robin memory after a restart.
func (s *Scheduler) SetLastServed(key Key, actor string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue(key)
	if q.lastServed != actor {
		q.lastServed = actor
		q.invalidate()
	}
}

// Depth is the number of jobs in key's queue, waiting plus acquiring; it is
// what cluster selection balances and what MaxQueueDepth bounds.
func (s *Scheduler) Depth(key Key) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[key]; q != nil {
		return q.depth()
	}
	return 0
}

// Keys returns the queues holding at least one job, sorted.
func (s *Scheduler) Keys() []Key {
	return s.keys(func(q *queue) bool { return q.depth() > 0 })
}

// Ready returns the queues whose slot is free and which have a job waiting
// or on deck, sorted: the ones a scheduling cycle should Pick from.
func (s *Scheduler) Ready() []Key {
	return s.keys(func(q *queue) bool { return q.acquiring == nil && (q.waiting > 0 || q.onDeck != nil) })
}

// Reservable returns the queues whose slot is held, with nobody on deck
// and a job waiting, sorted: the ones a cycle may Reserve from.
func (s *Scheduler) Reservable() []Key {
	return s.keys(func(q *queue) bool { return q.acquiring != nil && q.onDeck == nil && q.waiting > 0 })
}

func (s *Scheduler) keys(keep func(*queue) bool) []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ks []Key
	for k, q := range s.queues {
		if keep(q) {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, compareKeys)
	return ks
}

// Stats describes one queue.
type Stats struct {
	Key     Key
	Waiting int
	Actors  int // actors with at least one waiting job
	// Acquiring is the job holding the slot; zero if the slot is free.
	Acquiring Ref
	// OnDeck is the job picked ahead to take the slot next; zero if none.
	OnDeck         Ref
	AcquiringSince time.Time // by the scheduler's clock
	LastServed     string
	OldestWaiting  time.Time // Created of the earliest waiting job
}

// Snapshot describes every queue that holds a job or remembers a last-served
// actor, sorted by key. It is enough to persist the round-robin memory.
func (s *Scheduler) Snapshot() []Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Stats
	for k, q := range s.queues {
		if q.depth() == 0 && q.lastServed == "" {
			continue
		}
		st := Stats{Key: k, Waiting: q.waiting, Actors: len(q.heads), LastServed: q.lastServed}
		if e := q.acquiring; e != nil {
			st.Acquiring, st.AcquiringSince = e.ref(), e.since
		}
		if e := q.onDeck; e != nil {
			st.OnDeck = e.ref()
		}
		if len(q.heads) > 0 {
			f := q.heads[0]
			st.OldestWaiting = f.slots[f.head].e.job.Created
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Stats) int { return compareKeys(a.Key, b.Key) })
	return out
}
