package explain

import (
	"fmt"
	"strings"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/output"
)

// view prints, per job, its status and then the record as sentences.
// unprobed names the clusters no probe asks, with their backend.
func view(e *falconv1.ExpExplanation, unprobed map[string]string) output.TableFunc {
	return func(v output.View) error {
		w := v.Out
		fmt.Fprintf(w, "Experiment %s %q: %s\n", e.GetExpId(), e.GetExpName(), line(v.Status(e.GetStatus()), e.GetReason(), e.GetMessage()))
		for _, j := range e.GetJobs() {
			fmt.Fprintf(w, "\nJob %s (role %s): %s\n", j.GetJobId(), j.GetRole(), line(v.Status(j.GetStatus()), j.GetReason(), j.GetMessage()))
			if sel := j.GetSelection(); sel != nil {
				when := ""
				if at := sel.GetDecidedAt(); at != nil {
					when = fmt.Sprintf(", decided %s ago, at %s", output.Age(v.Now, at), at.AsTime().UTC().Format(time.RFC3339))
				}
				fmt.Fprintf(w, "  Placed: %s (policy %s%s)\n", sel.GetReason(), sel.GetPolicy(), when)
				candidates(w, sel, unprobed)
			} else if j.GetCluster() != "" {
				fmt.Fprintf(w, "  Cluster: %s (no decision record: placed before records were kept, or pinned there)\n", j.GetCluster())
			}
			if j.GetPosition() > 0 || j.GetQueue() != "" {
				fmt.Fprintf(w, "  Waiting: position %d in queue %s", j.GetPosition(), orUnknown(j.GetQueue()))
				if j.GetSlotHolder() != "" {
					fmt.Fprintf(w, ", slot held by %s", j.GetSlotHolder())
				}
				fmt.Fprintln(w)
			}
			if now := j.GetNow(); now != nil {
				if now.GetSelectedCluster() != "" {
					fmt.Fprintf(w, "  Now: %s\n", now.GetReason())
				} else {
					fmt.Fprintf(w, "  Now: no cluster can take it: %s\n", j.GetNoAvailableCluster())
				}
				candidates(w, now, unprobed)
			}
		}
		return nil
	}
}

func candidates(w interface{ Write([]byte) (int, error) }, sel *falconv1.ClusterSelection, unprobed map[string]string) {
	for _, c := range sel.GetCandidates() {
		facts := fmt.Sprintf("queue_depth=%d max=%s priority %d, idle pools %d, probe: %s",
			c.GetQueueDepth(), maxText(c.GetMaxQueueDepth()), c.GetPriority(), c.GetIdlePools(), probeText(c.GetProbe(), unprobed[c.GetCluster()]))
		switch {
		case c.GetRank() == 1:
			fmt.Fprintf(w, "    %-16s chosen: %s\n", c.GetCluster(), facts)
		case c.GetRank() > 1:
			fmt.Fprintf(w, "    %-16s ranked %d: %s\n", c.GetCluster(), c.GetRank(), facts)
		default:
			fmt.Fprintf(w, "    %-16s not: %s (%s)\n", c.GetCluster(), c.GetRejected(), facts)
		}
	}
}

// probeText is a candidate's probe; backend is set for a cluster no probe
// asks.
func probeText(p *falconv1.ClusterProbe, backend string) string {
	switch {
	case p == nil && backend != "":
		return fmt.Sprintf("not probed (%s cluster)", backend)
	case p == nil:
		return "never probed"
	}
	at := p.GetProbedAt().AsTime().UTC().Format("2006-01-02T15:04:05Z")
	if !p.GetReachable() {
		return fmt.Sprintf("unreachable: %s (probed %s)", p.GetError(), at)
	}
	return fmt.Sprintf("reachable, %d queued, %d running (probed %s)", p.GetQueueDepth(), p.GetRunningCount(), at)
}

func maxText(n int32) string {
	if n <= 0 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

func orUnknown(s string) string {
	if s == "" {
		return "(not known to the client)"
	}
	return s
}

func line(status, reason, msg string) string {
	return strings.Join(strings.Fields(strings.Join([]string{status, reason, msg}, " ")), " ")
}
