package resourcemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// leftover is a job that ended without this manager stopping it, whose
// cluster may still hold what it started: an abort forced through the API
// (exp abort --force ends the job at once and asks nothing of its
// cluster), a forced abort that landed while the job's create was in
// flight, or a stop its cluster never confirmed. Its stop is asked again
// until the cluster confirms it, so a slice nobody waits for any more is
// still given back.
type leftover struct {
	job *falconv1.Job
	// verify: the job left the snapshot unseen (a resync no longer found
	// it live), so its row is read before anything is stopped.
	verify bool
	retry  *backoff
}

// leftBehind records j, which just left the snapshot without a write of
// this manager's, as a leftover when it may have reached its cluster.
func (m *Manager) leftBehind(j *falconv1.Job, verify bool) {
	if j.GetClusterName() == "" || (!reachedCluster(j) && !m.sub.busy(j.GetId())) {
		return
	}
	if _, ok := m.mem.leftovers[j.GetId()]; !ok {
		m.mem.leftovers[j.GetId()] = &leftover{job: j, verify: verify}
	}
}

// clearLeftovers asks the cluster of every leftover whose turn has come to
// stop it. It runs after the picks, so it never holds up a handover. A job
// whose create is still in flight waits for it to return (its return wakes
// a cycle), so the stop cannot race the create and leave a Job behind.
func (m *Manager) clearLeftovers(ctx context.Context, c *cycle) {
	if len(m.mem.leftovers) == 0 {
		return
	}
	c.cur = ""
	now := m.now()
	// What each cluster holds, listed once a cycle however many leftovers
	// it has to judge.
	listed := map[string][]Resident{}
	residents := func(name string, cl *falconv1.Cluster, b Backend) []Resident {
		res, ok := listed[name]
		if !ok {
			if sw, isSweeper := b.(Sweeper); isSweeper {
				res, _ = sw.Residents(cl) // none on error: it may run
			}
			listed[name] = res
		}
		return res
	}
	for _, id := range slices.Sorted(maps.Keys(m.mem.leftovers)) { // the same order on every run
		l := m.mem.leftovers[id]
		if m.sub.busy(id) || ctx.Err() != nil {
			continue
		}
		m.sub.take(id) // the job has ended: what its create returned decides nothing
		if l.retry != nil && now.Before(l.retry.next) {
			c.deadline(l.retry.next)
			continue
		}
		name := l.job.GetClusterName()
		cl := c.clusters[name]
		b, err := m.backendFor(cl)
		if err != nil {
			// Deleted from the registry, or run elsewhere: nothing to ask.
			delete(m.mem.leftovers, id)
			m.log.Warn("cannot remove what an ended job left on its cluster", "job", id, "cluster", name, "err", err)
			continue
		}
		_, pooled := b.(PoolBackend)
		if l.verify {
			row, found, err := m.endedRow(ctx, id)
			if err != nil {
				l.retry = planLeftoverRetry(l.retry, err, now)
				c.deadline(l.retry.next)
				continue
			}
			if !planLeftover(row, found, pooled, mayRun(residents(name, cl, b), id)) {
				delete(m.mem.leftovers, id)
				continue
			}
			if found {
				l.job = row
			}
			l.verify = false
		}
		if h := c.health[name]; h.Backoff {
			err = fmt.Errorf("cluster %s is unreachable: %w", name, h.Err)
		} else {
			err = b.Stop(ctx, cl, l.job)
		}
		if err != nil {
			l.retry = planLeftoverRetry(l.retry, err, now)
			c.deadline(l.retry.next)
			m.log.Warn("removing what an ended job left on its cluster failed, retrying", "job", id, "cluster", name, "attempt", l.retry.attempts, "err", err)
			continue
		}
		delete(m.mem.leftovers, id)
		m.log.Info("removed what an ended job left on its cluster", "job", id, "exp", l.job.GetExpId(), "cluster", name, "status", l.job.GetStatus())
	}
}

// mayRun reports whether something of the job may still run on its
// cluster, which holds res: false only when res lists the job's objects as
// finished. A job it does not list may have been created since the
// backend's cache last heard (or the backend cannot list), so it may run.
func mayRun(res []Resident, id string) bool {
	for _, r := range res {
		if r.JobID == id {
			return r.Active
		}
	}
	return true
}

// endedRow reads the row of a job that left the snapshot: found is false
// when it is gone (its experiment deleted); err is any other failure, for
// the caller to judge again later.
func (m *Manager) endedRow(ctx context.Context, id string) (row *falconv1.Job, found bool, err error) {
	row, err = m.jobs.GetJob(ctx, &falconv1.GetJobRequest{Id: id})
	if status.Code(err) == codes.NotFound {
		return nil, false, nil
	}
	return row, err == nil, err
}
