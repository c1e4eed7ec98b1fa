package exp

import (
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// A pending experiment mirrors its job's Reason and Message: its queue
// position, Next, Dispatching. Most of those states last well under a
// second in a busy queue (Next until the holder's pods run, Dispatching
// until its own do), and each mirror costs a write, an event and a
// change on the feed: 4.35 mirrors per experiment in a dispatch run of
// 240 experiments, where the job's next state would soon replace most of
// them. So under Run a mirror is written once the jobs' state has held
// for mirrorGrace, as the resource manager writes a job's pod progress
// (its progressGrace), and in any case once it has waited mirrorMaxWait,
// so a job whose message keeps moving still shows on its experiment.
// A change of the experiment's status is never held: it is written by
// the job's own transaction, or by this controller at once.
const (
	mirrorGrace   = time.Second
	mirrorMaxWait = 5 * time.Second
)

// mirrorDue says when p may be written: the zero time for now. Only a
// plan that does nothing but mirror a pending job onto its Created
// experiment waits: until the newest of its jobs' states is mirrorGrace
// old, and no later than mirrorMaxWait after it was first held
// (heldSince; zero if it was not).
func mirrorDue(p lifecycle.Plan, jobs []*falconv1.Job, heldSince, now time.Time) time.Time {
	if p.Artifact != nil || len(p.AbortJobs) > 0 || len(p.Exp) != 1 {
		return time.Time{}
	}
	if u := p.Exp[0]; u.From != lifecycle.Created || u.To != lifecycle.Created {
		return time.Time{}
	}
	var newest time.Time
	for _, j := range jobs {
		if t := j.GetUpdatedAt().AsTime(); t.After(newest) {
			newest = t
		}
	}
	due := newest.Add(mirrorGrace)
	if !heldSince.IsZero() && heldSince.Add(mirrorMaxWait).Before(due) {
		due = heldSince.Add(mirrorMaxWait)
	}
	if !due.After(now) {
		return time.Time{}
	}
	return due
}
