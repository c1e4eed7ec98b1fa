package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
)

// Skipped counts the jobs of a history that a trace cannot replay, by why.
type Skipped struct {
	NeverStarted int // aborted or failed before they ran: no duration to replay
	NotTPU       int // CPU and GPU jobs: the simulator models TPU node pools only
	BadShape     int // an accelerator or topology the table no longer knows
	MultiSlice   int // several slices at once: the simulator models a pool per job
}

// Total is how many jobs were skipped.
func (s Skipped) Total() int { return s.NeverStarted + s.NotTPU + s.BadShape + s.MultiSlice }

func (s Skipped) String() string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{s.NeverStarted, "never started"}, {s.NotTPU, "not on a TPU"}, {s.BadShape, "of a shape the accelerator table does not know"},
		{s.MultiSlice, "on several slices"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}

// FromHistory turns jobs as ListJobHistory returns them into a trace, in
// submission order: a job is submitted at its creation by its creator,
// asks for its task's accelerator, topology and hosts, and runs from its
// start to its finish (to now while it still runs). A job is pinned to a
// cluster only when its placement record says the experiment pinned it;
// otherwise the cluster it ran on is where selection sent it, which a
// simulated policy decides again. Clusters lists every cluster the
// history ran on, for a default world of the same names.
func FromHistory(jobs []*falconv1.Job, now time.Time) (trace []Job, clusters []string, skipped Skipped) {
	seen := map[string]bool{}
	for _, j := range jobs {
		ts := j.GetTaskSpec()
		if j.GetStartedAt() == nil {
			skipped.NeverStarted++
			continue
		}
		spec, err := accelerator.Lookup(ts.GetDeviceType())
		if err != nil || ts.GetDeviceType() == "" {
			skipped.NotTPU++
			continue
		}
		if spec.Kind != accelerator.KindTPU {
			skipped.NotTPU++
			continue
		}
		if ts.GetSlices() > 1 {
			skipped.MultiSlice++
			continue
		}
		sl, err := spec.Slice(ts.GetDeviceTopo(), int(ts.GetReplica()), 0)
		if err != nil {
			skipped.BadShape++
			continue
		}
		start, end := j.GetStartedAt().AsTime(), now
		if j.GetFinishedAt() != nil {
			end = j.GetFinishedAt().AsTime()
		}
		d := end.Sub(start).Truncate(time.Second)
		if d <= 0 {
			d = time.Second // it ran, however briefly: a trace's durations are positive
		}
		tj := Job{T: j.GetCreatedAt().AsTime().UTC().Truncate(time.Second), User: j.GetCreator(), Accelerator: spec.Name,
			Topology: strings.ToLower(sl.Topology), Hosts: sl.Hosts, Duration: d, SupplyMode: ts.GetSupplyMode()}
		if tj.User == "" {
			tj.User = "unknown"
		}
		if c := j.GetClusterName(); c != "" {
			if !seen[c] {
				seen[c] = true
				clusters = append(clusters, c)
			}
			if pinned(j.GetSelection()) {
				tj.Cluster = c
			}
		}
		trace = append(trace, tj)
	}
	sort.SliceStable(trace, func(a, b int) bool { return trace[a].T.Before(trace[b].T) })
	sort.Strings(clusters)
	return trace, clusters, skipped
}

// pinned reports whether a placement record is that of a job pinned to
// its cluster: selection turned the others down for the pin.
func pinned(sel *falconv1.ClusterSelection) bool {
	for _, c := range sel.GetCandidates() {
		if strings.HasPrefix(c.GetRejected(), "the job is pinned to ") {
			return true
		}
	}
	return strings.Contains(sel.GetReason(), "pinned to it")
}
