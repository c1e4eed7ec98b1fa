package resourcemanager

import (
	"context"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// snapshot is the resource manager's copy of the live jobs (Pending,
// Running, Aborting) and of the registered clusters, kept current from the
// API server's change feed:
// a cycle reads again only the experiments that changed, so its cost
// follows the changes, not the number of live jobs. A full read (resync)
// replaces it on the first cycle, whenever the feed cannot vouch for what
// it missed, and every resyncEvery as the safety net.
type snapshot struct {
	jobs  map[string]*falconv1.Job
	byExp map[string]map[string]bool // exp -> its live jobs
	// types counts the live jobs of each accelerator type: the types the
	// local fallback cluster must offer (see candidates).
	types      map[string]int
	resyncedAt time.Time
	// clusters and probes are the registry's, as last read, and when
	// (clusterList, addProbes).
	clusters   *falconv1.ListClustersResponse
	clustersAt time.Time
	probes     *falconv1.ListClusterProbesResponse
	probesAt   time.Time
	// sweepAgain asks for a resync next cycle: a sweep could not see
	// what a cluster holds (its caches not synced yet, after a start), and
	// a sweep runs only on a resync, when the snapshot holds every live
	// job.
	sweepAgain bool
}

func newSnapshot() *snapshot {
	return &snapshot{jobs: map[string]*falconv1.Job{}, byExp: map[string]map[string]bool{}, types: map[string]int{}}
}

func live(j *falconv1.Job) bool {
	return !lifecycle.JobMachine.IsTerminal(lifecycle.Status(j.GetStatus()))
}

// put records j as read; it reports whether j is live.
func (s *snapshot) put(j *falconv1.Job) bool {
	if old, ok := s.jobs[j.GetId()]; ok {
		s.types[deviceType(old)]--
	}
	if !live(j) {
		s.drop(j.GetId())
		return false
	}
	s.jobs[j.GetId()] = j
	s.types[deviceType(j)]++
	if s.byExp[j.GetExpId()] == nil {
		s.byExp[j.GetExpId()] = map[string]bool{}
	}
	s.byExp[j.GetExpId()][j.GetId()] = true
	return true
}

func (s *snapshot) drop(id string) {
	j, ok := s.jobs[id]
	if !ok {
		return
	}
	if s.types[deviceType(j)]--; s.types[deviceType(j)] <= 0 {
		delete(s.types, deviceType(j))
	}
	delete(s.jobs, id)
	if e := s.byExp[j.GetExpId()]; e != nil {
		delete(e, id)
		if len(e) == 0 {
			delete(s.byExp, j.GetExpId())
		}
	}
}

// ordered lists jobs oldest first (ID breaks ties), the order every pass of
// a cycle takes them in, so that two runs over the same rows decide alike.
func ordered(jobs map[string]*falconv1.Job) []*falconv1.Job {
	out := make([]*falconv1.Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool {
		ta, tb := out[a].GetCreatedAt().AsTime(), out[b].GetCreatedAt().AsTime()
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return out[a].GetId() < out[b].GetId()
	})
	return out
}

// readChanged reads the jobs of the changed experiments and folds them into the
// snapshot; it returns the IDs of the jobs read (live or not: one that
// ended must still leave its queue and pool).
func (m *Manager) readChanged(ctx context.Context, exps []string) (map[string]bool, error) {
	read := map[string]bool{}
	for start := 0; start < len(exps); start += expBatch {
		chunk := exps[start:min(start+expBatch, len(exps))]
		seen := map[string]bool{}
		token := ""
		for {
			resp, err := m.jobs.ListJobs(ctx, &falconv1.ListJobsRequest{ExpIds: chunk, PageSize: 1000, PageToken: token})
			if err != nil {
				return nil, err
			}
			for _, j := range resp.GetItems() {
				seen[j.GetId()] = true
				read[j.GetId()] = true
				if old := m.snap.jobs[j.GetId()]; old != nil && !live(j) && j.GetStatus() == string(lifecycle.Aborted) {
					// Live here, Aborted there, and not by a write of ours
					// (ours leave the snapshot as they land): an abort
					// forced through the API, which asked nothing of the
					// cluster.
					m.leftBehind(withCluster(j, old), false)
				}
				m.put(j)
			}
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
		// Jobs of a deleted experiment are gone from the store.
		for _, e := range chunk {
			for id := range m.snap.byExp[e] {
				if !seen[id] {
					read[id] = true
					m.leftBehind(m.snap.jobs[id], true)
					m.gone(id)
				}
			}
		}
	}
	return read, nil
}

// expBatch is how many experiments one ListJobs asks for (the server's
// exp_ids limit).
const expBatch = 1000

// resync reads every live job again and replaces the snapshot; every job is
// then looked at this cycle.
func (m *Manager) resync(ctx context.Context) error {
	jobs, err := m.liveJobs(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		seen[j.GetId()] = true
		m.put(j)
	}
	for id, j := range m.snap.jobs {
		if !seen[id] {
			// It ended, or its experiment went, by a write that was not
			// ours: what it left is looked at once its row is read.
			m.leftBehind(j, true)
			m.gone(id)
		}
	}
	m.snap.resyncedAt = m.now()
	return nil
}

// put folds a job as read into the snapshot, keeping the carried config
// (lists do not carry it) and forgetting the queue place of a job no
// longer Pending.
func (m *Manager) put(j *falconv1.Job) {
	if old, ok := m.snap.jobs[j.GetId()]; ok && j.Config == "" {
		j.Config = old.GetConfig()
	}
	if j.GetStatus() != string(lifecycle.Running) {
		m.ends.drop(j.GetId())
	}
	if !m.snap.put(j) {
		m.deck.drop(j.GetId())
		m.mem.forgetJob(j.GetId())
		return
	}
	if j.GetStatus() != string(lifecycle.Pending) {
		m.deck.drop(j.GetId())
		m.mem.leaveQueue(j.GetId())
	}
}

// gone forgets a job that is no longer live or no longer exists.
func (m *Manager) gone(id string) {
	m.deck.drop(id)
	m.ends.drop(id)
	m.snap.drop(id)
	m.mem.forgetJob(id)
	m.sub.forget(id)
}

// withCluster is j as read, naming the cluster and pool the snapshot's
// copy of it named: a forced abort keeps them, but a row read from a
// list is all the stop has to go by.
func withCluster(j, old *falconv1.Job) *falconv1.Job {
	if j.GetClusterName() != "" || old.GetClusterName() == "" {
		return j
	}
	c := proto.Clone(j).(*falconv1.Job)
	c.ClusterName, c.NodePool = old.GetClusterName(), old.GetNodePool()
	if c.DispatchedAt == nil {
		c.DispatchedAt = old.GetDispatchedAt()
	}
	return c
}
