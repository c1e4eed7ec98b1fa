package resourcemanager

import (
	"context"
	"sync"
)

// submitter carries Kubernetes submissions out of the cycle. A create costs
// a round trip to the cluster's apiserver (tens of milliseconds under load,
// eight at a time per cluster); a cycle that waited for its submissions held
// every other queue's handover behind them. With a submitter the cycle
// records the pick (the write comes first, so a crash never leaves a Job
// whose row does not name its cluster), hands the submission over and ends;
// the next cycle that looks at the job takes the outcome and decides on it
// exactly as it would have in the same cycle (dispatch, planDispatch).
//
// Only Run starts one: a bare Reconcile, as tests call it, still submits
// within the cycle. While a job's submission is in flight the cycle leaves
// the job alone (an abort waits for the create to return, so the stop that
// follows cannot race it and leave a Job behind). Every outcome wakes a
// cycle for its job at once: nothing else is sure to (the echo of the
// pick's write is skipped, see Manager.writer, and not every backend
// reports a start), and the wake is coalesced with the informer's report
// of the Job where there is one.
//
// It holds no state a restart needs: a submission in flight when the
// controller dies left its row Dispatching, and the next controller
// dispatches it again (Dispatch is idempotent).
type submitter struct {
	touch func(ids ...string)

	mu       sync.Mutex
	inflight map[string]string // job ID -> cluster
	perClust map[string]int    // submissions in flight per cluster
	outcome  map[string]error  // returned, not yet taken
	sems     map[string]chan struct{}
	wg       sync.WaitGroup
}

// submitQueue bounds the submissions handed over and not yet returned per
// cluster: twice what runs at once (submitPerCluster), so a cluster's
// workers never wait for the next cycle's picks, and a burst of a thousand
// CPU-only picks is not queued in one go ahead of a later handover.
const submitQueue = 2 * submitPerCluster

func newSubmitter(touch func(ids ...string)) *submitter {
	return &submitter{touch: touch, inflight: map[string]string{}, perClust: map[string]int{},
		outcome: map[string]error{}, sems: map[string]chan struct{}{}}
}

// start runs submit for the job in the background, at most
// submitPerCluster at a time on one cluster.
func (s *submitter) start(ctx context.Context, cluster, id string, submit func(context.Context) error) {
	s.mu.Lock()
	if _, busy := s.inflight[id]; busy {
		s.mu.Unlock()
		return
	}
	s.inflight[id] = cluster
	s.perClust[cluster]++
	sem := s.sems[cluster]
	if sem == nil {
		sem = make(chan struct{}, submitPerCluster)
		s.sems[cluster] = sem
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		sem <- struct{}{}
		err := submit(ctx)
		<-sem
		s.mu.Lock()
		delete(s.inflight, id)
		s.perClust[cluster]--
		s.outcome[id] = err
		s.mu.Unlock()
		s.touch(id)
	}()
}

// busy reports whether the job's submission is in flight. A nil submitter
// (a bare Reconcile) has none; the same holds for the methods below.
func (s *submitter) busy(id string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.inflight[id]
	return ok
}

// has reports whether the job's submission is in flight or returned and
// not taken yet: one the deck started, which the cycle's pick must not
// start again.
func (s *submitter) has(id string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, busy := s.inflight[id]
	_, returned := s.outcome[id]
	return busy || returned
}

// room reports how many more submissions the cluster may be handed now.
func (s *submitter) room(cluster string) int {
	if s == nil {
		return submitQueue
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return submitQueue - s.perClust[cluster]
}

// take returns the job's outcome once, if its submission returned.
func (s *submitter) take(id string) (returned bool, err error) {
	if s == nil {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err, returned = s.outcome[id]
	delete(s.outcome, id)
	return returned, err
}

// returned names the jobs whose outcomes were not taken yet.
func (s *submitter) returned() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.outcome))
	for id := range s.outcome {
		ids = append(ids, id)
	}
	return ids
}

// forget drops the outcome of a job that left the snapshot.
func (s *submitter) forget(id string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.outcome, id)
	s.mu.Unlock()
}

// wait returns once every submission handed over has returned: the drain
// of a graceful shutdown (000 Phase 2).
func (s *submitter) wait() {
	if s != nil {
		s.wg.Wait()
	}
}
