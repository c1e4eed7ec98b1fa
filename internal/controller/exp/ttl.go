package exp

import (
	"context"
	"iter"
	"maps"
	"slices"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// ttlDue picks the experiments whose time-to-live needs the API server,
// by the controller's clock: past their expiry, idle past their idle_ttl
// (as far as the controller can see: the server also counts output), or
// within lifecycle.TTLWarning of expiry and not yet warned for it
// (warned maps an experiment to the expiry it was warned for). It is pure:
// the server decides by its own clock and records what it did. The IDs
// come sorted, whatever order exps yields them in.
func ttlDue(exps iter.Seq[*falconv1.Experiment], now time.Time, warned map[string]time.Time) []string {
	var due []string
	for e := range exps {
		st := lifecycle.Status(e.GetStatus())
		if lifecycle.ExperimentMachine.IsTerminal(st) || st == lifecycle.Aborting || e.GetStartedAt() == nil {
			continue
		}
		if e.ExpiresAt != nil {
			at := e.GetExpiresAt().AsTime()
			if !now.Before(at) {
				due = append(due, e.GetId())
				continue
			}
			if w, ok := warned[e.GetId()]; at.Sub(now) <= lifecycle.TTLWarning && (!ok || !w.Equal(at)) {
				due = append(due, e.GetId())
				continue
			}
		}
		if idle := e.GetIdleTtl().AsDuration(); e.IdleTtl != nil && idle > 0 {
			last := e.GetStartedAt().AsTime()
			if e.ActiveAt != nil && e.GetActiveAt().AsTime().After(last) {
				last = e.GetActiveAt().AsTime()
			}
			if now.Sub(last) >= idle {
				due = append(due, e.GetId())
			}
		}
	}
	slices.Sort(due)
	return due
}

// enforceTTL asks the server to act on each experiment ttlDue picked and
// remembers the warnings given, so an experiment inside its warning window
// is not asked about on every cycle. The memory is only a saving: a
// controller that lost it asks once more, and the server warns once.
func (c *Controller) enforceTTL(ctx context.Context) {
	// Over the live set as it is, every cycle: copying it first (or
	// indexing it again to forget warnings) allocated per cycle in
	// proportion to every live experiment.
	for id := range c.warned {
		if _, ok := c.live[id]; !ok {
			delete(c.warned, id)
		}
	}
	for _, id := range ttlDue(maps.Values(c.live), c.now(), c.warned) {
		resp, err := c.exps.EnforceTTL(ctx, &falconv1.EnforceTTLRequest{Id: id})
		if err != nil {
			logUpdate(c.log, "experiment ttl", id, err)
			continue
		}
		// Only the server's word counts: by its clock the warning may not
		// be due yet, and it is asked again next cycle. (A warning given
		// by another replica answers "" too: asking again is one call a
		// cycle, and the server never warns twice.)
		if x := resp.GetExperiment(); resp.GetAction() == "warned" && x.ExpiresAt != nil {
			c.warned[id] = x.GetExpiresAt().AsTime()
		}
	}
}
