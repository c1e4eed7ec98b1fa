package sim

import (
	"math"
	"slices"
	"sort"
	"time"
)

// JobRecord is one job's timeline.
type JobRecord struct {
	Index       int    `json:"index"`
	User        string `json:"user"`
	Accelerator string `json:"accelerator"`
	Topology    string `json:"topology"`
	Hosts       int    `json:"hosts"`
	Cluster     string `json:"cluster"`
	Pool        string `json:"pool"`
	CreatedPool bool   `json:"created_pool"` // ran on the pool created for it
	// PoolFor is the index of the job its pool was created for.
	PoolFor   int           `json:"pool_created_for"`
	Submitted time.Time     `json:"submitted"`
	Picked    time.Time     `json:"picked"`
	Started   time.Time     `json:"started"`
	Ended     time.Time     `json:"ended"`
	Wait      time.Duration `json:"wait_ns"`
}

// UserWaits are one user's waits (submission to start).
type UserWaits struct {
	User string        `json:"user"`
	Jobs int           `json:"jobs"`
	Mean time.Duration `json:"mean_ns"`
	P95  time.Duration `json:"p95_ns"`
	Max  time.Duration `json:"max_ns"`
}

// ClusterUse is one cluster's pools over the run.
type ClusterUse struct {
	Cluster      string        `json:"cluster"`
	PoolsCreated int           `json:"pools_created"`
	PoolTotal    time.Duration `json:"pool_total_ns"` // creation request to gone
	PoolBusy     time.Duration `json:"pool_busy_ns"`
	// Utilisation is busy over total pool time.
	Utilisation float64 `json:"utilisation"`
	// FlexStart counts the pools created without the reservation.
	FlexStart int `json:"flex_start_pools"`
}

// QueueDepth is one (cluster, shape) queue's waiting jobs over time.
type QueueDepth struct {
	Cluster string  `json:"cluster"`
	Queue   string  `json:"queue"`
	Mean    float64 `json:"mean"`
	Peak    int     `json:"peak"`
}

// Result is what one policy did with a trace.
type Result struct {
	Policy       string `json:"policy"`
	Jobs         int    `json:"jobs"`
	PoolsCreated int    `json:"pools_created"`
	// Reused counts jobs that ran on a pool created for another job.
	Reused      int           `json:"reused"`
	PoolTotal   time.Duration `json:"pool_total_ns"`
	PoolBusy    time.Duration `json:"pool_busy_ns"`
	PoolIdle    time.Duration `json:"pool_idle_ns"` // ready, not deleting, no job: the three below
	IdleFirst   time.Duration `json:"idle_first_ns"`
	IdleBetween time.Duration `json:"idle_between_ns"`
	IdleLast    time.Duration `json:"idle_last_ns"`
	WaitMean    time.Duration `json:"wait_mean_ns"`
	WaitP95     time.Duration `json:"wait_p95_ns"`
	WaitMax     time.Duration `json:"wait_max_ns"`
	// Jain is Jain's fairness index of the users' mean waits: 1 when all
	// wait alike, 1/n when one user does all the waiting.
	Jain float64 `json:"jain"`
	// WorstP95OverMedian is the worst user's p95 wait over the median
	// user's p95 (0 when the median user never waits).
	WorstP95OverMedian float64       `json:"worst_p95_over_median"`
	Makespan           time.Duration `json:"makespan_ns"`
	Users              []UserWaits   `json:"users"`
	Clusters           []ClusterUse  `json:"clusters"`
	Queues             []QueueDepth  `json:"queues"`
	Timeline           []JobRecord   `json:"-"`
	Cycles             int           `json:"cycles"`
	Instants           int           `json:"instants"`
}

func (r *run) result() *Result {
	res := &Result{Policy: r.policy.Name, Jobs: len(r.jobs), Cycles: r.cycles, Instants: r.instants}
	waits := map[string][]time.Duration{}
	var all []time.Duration
	first, last := r.jobs[0].tj.T, time.Time{}
	for _, j := range r.jobs {
		w := j.start.Sub(j.tj.T)
		rec := JobRecord{Index: j.idx, User: j.tj.User, Accelerator: j.tj.Accelerator, Topology: j.tj.Topology, Hosts: j.tj.Hosts,
			Cluster: j.cluster.cfg.Name, Pool: j.pool.name, CreatedPool: j.pool.createdFor == j, PoolFor: j.pool.createdFor.idx,
			Submitted: j.tj.T, Picked: j.placed, Started: j.start, Ended: j.end, Wait: w}
		res.Timeline = append(res.Timeline, rec)
		waits[j.tj.User] = append(waits[j.tj.User], w)
		all = append(all, w)
		if j.end.After(last) {
			last = j.end
		}
	}
	res.Makespan = last.Sub(first)
	res.WaitMean, res.WaitP95, res.WaitMax = Mean(all), P95(all), slices.Max(all)
	var means []float64
	var p95s []time.Duration
	for u, ws := range waits {
		uw := UserWaits{User: u, Jobs: len(ws), Mean: Mean(ws), P95: P95(ws), Max: slices.Max(ws)}
		res.Users = append(res.Users, uw)
	}
	sort.Slice(res.Users, func(a, b int) bool { return res.Users[a].User < res.Users[b].User })
	for _, u := range res.Users {
		means = append(means, u.Mean.Seconds())
		p95s = append(p95s, u.P95)
	}
	res.Jain = Jain(means)
	res.WorstP95OverMedian = WorstOverMedian(p95s)

	use := map[string]*ClusterUse{}
	for _, c := range r.clusters {
		use[c.cfg.Name] = &ClusterUse{Cluster: c.cfg.Name}
	}
	for _, p := range r.pools {
		cu := use[p.cluster.cfg.Name]
		res.PoolsCreated++
		cu.PoolsCreated++
		if !p.reservation {
			cu.FlexStart++
		}
		total := p.goneAt.Sub(p.requested)
		res.PoolTotal += total
		cu.PoolTotal += total
		idleFrom := p.readyAt
		for i, j := range p.runs {
			busy := j.end.Sub(j.start)
			res.PoolBusy += busy
			cu.PoolBusy += busy
			if j != p.createdFor {
				res.Reused++
			}
			if i == 0 {
				res.IdleFirst += j.start.Sub(idleFrom)
			} else {
				res.IdleBetween += j.start.Sub(idleFrom)
			}
			idleFrom = j.end
		}
		if p.deletingAt.After(idleFrom) {
			res.IdleLast += p.deletingAt.Sub(idleFrom)
		}
	}
	res.PoolIdle = res.IdleFirst + res.IdleBetween + res.IdleLast
	for _, c := range r.clusters {
		cu := use[c.cfg.Name]
		if cu.PoolTotal > 0 {
			cu.Utilisation = float64(cu.PoolBusy) / float64(cu.PoolTotal)
		}
		res.Clusters = append(res.Clusters, *cu)
	}
	span := r.now.Sub(first)
	for k, d := range r.depth {
		q := QueueDepth{Cluster: k.Cluster, Queue: k.Topology, Peak: d.peak}
		if span > 0 {
			q.Mean = float64(d.area) / float64(span)
		}
		res.Queues = append(res.Queues, q)
	}
	sort.Slice(res.Queues, func(a, b int) bool {
		if res.Queues[a].Cluster != res.Queues[b].Cluster {
			return res.Queues[a].Cluster < res.Queues[b].Cluster
		}
		return res.Queues[a].Queue < res.Queues[b].Queue
	})
	return res
}

// Mean of ds (0 for none).
func Mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

// P95 is the nearest-rank 95th percentile (0 for none), as the simulated
// day's benchmark computes it.
func P95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(0.95*float64(len(s))))-1]
}

// Jain is Jain's fairness index (Σx)² / (n·Σx²): 1 when every x is equal,
// 1/n when one holds everything. All zeros (nobody waits) is perfectly
// fair: 1.
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if len(xs) == 0 || s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// WorstOverMedian is max(ds) over the median of ds (the lower median for
// an even count); 0 when the median is 0 (the ratio is undefined: the
// median user never waits).
func WorstOverMedian(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med, worst := s[(len(s)-1)/2], s[len(s)-1]
	if med == 0 {
		return 0
	}
	return float64(worst) / float64(med)
}
