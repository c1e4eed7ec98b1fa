package web

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// clusterJobs bounds the jobs of one status read for one cluster: the page
// says how many more the queue counts hold.
const clusterJobs = 500

// clusterView is one cluster's queues and capacity, as `falcon cluster
// status` shows it, plus its jobs: the waiting ones in queue order with
// their positions, the acquiring and the running ones.
type clusterView struct {
	Cluster   *falconv1.Cluster
	Status    *falconv1.ClusterStatus
	StatusErr string
	Waiting   []waitingJob
	Acquiring []*falconv1.Job
	Running   []*falconv1.Job
	// Cut is set when a list stopped at clusterJobs.
	PendingCut, RunningCut bool
	JobsErr                string
	QueuedTotal            int // waiting jobs the queues count
}

type waitingJob struct {
	*falconv1.Job
	Pos int // 0: no position written yet
}

type clustersView struct {
	Clusters []*clusterView
	Only     string // the one cluster asked for
}

func (h *Handler) clustersPage(w http.ResponseWriter, r *http.Request) {
	ctx := h.call(r)
	only := query(r, "cluster")
	var cls []*falconv1.Cluster
	if only != "" {
		c, err := h.clusters.GetCluster(ctx, &falconv1.GetClusterRequest{Name: only})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		cls = []*falconv1.Cluster{c}
	} else {
		resp, err := h.clusters.ListClusters(ctx, &falconv1.ListClustersRequest{})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		cls = resp.GetItems()
	}
	v := clustersView{Only: only}
	var g errgroup.Group
	g.SetLimit(8)
	for _, c := range cls {
		cv := &clusterView{Cluster: c}
		v.Clusters = append(v.Clusters, cv)
		g.Go(func() error {
			st, err := h.clusters.GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: c.GetName()})
			if err != nil {
				cv.StatusErr = message(err)
			}
			cv.Status = st
			for _, q := range st.GetQueues() {
				cv.QueuedTotal += int(q.GetWaiting())
			}
			return nil
		})
		g.Go(func() error {
			pending, err := h.jobs.ListJobs(ctx, &falconv1.ListJobsRequest{ClusterName: c.GetName(),
				Statuses: []string{string(lifecycle.Pending)}, PageSize: clusterJobs})
			if err != nil {
				cv.JobsErr = message(err)
				return nil
			}
			cv.PendingCut = pending.GetNextPageToken() != ""
			for _, j := range pending.GetItems() {
				if lifecycle.Acquiring(lifecycle.Reason(j.GetReason())) {
					cv.Acquiring = append(cv.Acquiring, j)
					continue
				}
				pos, _ := queuePosition(j.GetMessage())
				cv.Waiting = append(cv.Waiting, waitingJob{j, pos})
			}
			sortWaiting(cv.Waiting)
			return nil
		})
		g.Go(func() error {
			running, err := h.jobs.ListJobs(ctx, &falconv1.ListJobsRequest{ClusterName: c.GetName(),
				Statuses: []string{string(lifecycle.Running)}, PageSize: clusterJobs})
			if err != nil {
				return nil // the pending read says why, with the same cause
			}
			cv.Running, cv.RunningCut = running.GetItems(), running.GetNextPageToken() != ""
			return nil
		})
	}
	_ = g.Wait()
	h.render(w, r, http.StatusOK, "clusters.html", page{Title: "Queues and capacity", Nav: "clusters", Data: v})
}

// positionPrefix starts the Message the resource manager gives a waiting
// job (queue.Position.Message); the API has no field for the position, so
// the order shown is read back from it (TestQueuePositionReadsTheSchedulersMessage
// holds the two together).
const positionPrefix = "queue position #"

// queuePosition reads the position out of a waiting job's Message.
func queuePosition(msg string) (int, bool) {
	rest, ok := strings.CutPrefix(msg, positionPrefix)
	if !ok {
		return 0, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

// sortWaiting orders waiting jobs as their queues will pick them: by shape
// (each shape is its own queue), then position; jobs without a position
// yet go last in their queue, oldest first, as they joined it.
func sortWaiting(ws []waitingJob) {
	slices.SortStableFunc(ws, func(a, b waitingJob) int {
		if c := cmp.Compare(shape(a.GetTaskSpec()), shape(b.GetTaskSpec())); c != 0 {
			return c
		}
		switch {
		case a.Pos == 0 && b.Pos != 0:
			return 1
		case b.Pos == 0 && a.Pos != 0:
			return -1
		}
		return cmp.Compare(a.Pos, b.Pos)
	})
}

// shape is how a job's accelerator reads on the page: v7x 2x2x4, or cpu.
func shape(ts *falconv1.TaskSpec) string {
	s := strings.TrimSpace(ts.GetDeviceType() + " " + ts.GetDeviceTopo())
	if s == "" {
		return "cpu"
	}
	if ts.GetDeviceTopo() == "" && ts.GetDeviceCount() > 0 {
		s += " × " + strconv.Itoa(int(ts.GetDeviceCount()))
	}
	return s
}
