package apiserver

import (
	"context"
	"time"

	"github.com/falconhq/falcon/internal/changefeed"
)

// WithReplicaPoll sets how often the server reads the changes that other
// server replicas on its database wrote, to pass them to its own watchers
// (default 250ms; 0 turns it off, for a server that is alone on its
// database, as falcon dev's is).
func WithReplicaPoll(d time.Duration) Option { return func(s *Server) { s.replicaPoll = d } }

// replicaOverlap is how far back each read of other replicas' changes
// reaches before the newest it saw: an event carries its writer's clock
// from before its transaction committed, so a change may become visible
// after a later-stamped one was read. A change seen twice is published once
// (seen); one that takes longer than this to commit, or a clock skewed by
// more, is left to the watchers' periodic resync.
const replicaOverlap = 5 * time.Second

// replicaPage bounds one read of other replicas' changes.
const replicaPage = 1000

// FollowReplicas publishes to the server's change feed every experiment and
// job change that other server replicas write to the same database, until
// ctx is done. Without it, a controller following this server learns of a
// change made through another one (a user's abort) only at its next full
// read. Serve starts it unless WithReplicaPoll(0).
func (s *Server) FollowReplicas(ctx context.Context, every time.Duration) {
	type key struct {
		exp string
		seq int64
	}
	since := time.Now().Add(-replicaOverlap)
	seen := map[key]time.Time{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		refs, err := s.store.OtherWrites(ctx, since, replicaPage)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("read other replicas' changes", "err", err)
			}
			continue
		}
		newest := since.Add(replicaOverlap)
		var changes []changefeed.Change
		named := map[string]bool{}
		for _, r := range refs {
			k := key{r.ExpID, r.Seq}
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = r.Time
			if r.Time.After(newest) {
				newest = r.Time
			}
			if !named[r.ExpID] {
				named[r.ExpID] = true
				changes = append(changes, expChange(r.ExpID))
			}
		}
		if len(changes) > 0 {
			s.changed(changes...)
		}
		if len(refs) == replicaPage {
			// More than a page: go on from the page's last time, or the
			// overlap would read this page again and again.
			since = refs[len(refs)-1].Time
		} else {
			since = newest.Add(-replicaOverlap)
		}
		for k, at := range seen {
			if at.Before(since) {
				delete(seen, k)
			}
		}
	}
}
