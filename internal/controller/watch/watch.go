package watch

import (
	"context"
	"log/slog"
	"slices"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// Changes returns a channel that receives (coalesced) whenever the API server
// reports a change; with kinds, only a change of one of those kinds, or a
// stream's hello or a "resync" (what the stream missed is unknown then).
// It runs until ctx is done.
func Changes(ctx context.Context, jobs falconv1.JobServiceClient, log *slog.Logger, kinds ...string) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			stream, err := jobs.WatchChanges(ctx, &falconv1.WatchChangesRequest{})
			if err == nil {
				for {
					var c *falconv1.Change
					if c, err = stream.Recv(); err != nil {
						break
					}
					backoff = 100 * time.Millisecond
					if !wakes(c, kinds) {
						continue
					}
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
			if ctx.Err() != nil {
				return
			}
			log.Debug("change stream broken; reconnecting", "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}()
	return out
}

// wakes reports whether c is news to a watcher of kinds (none: of all).
func wakes(c *falconv1.Change, kinds []string) bool {
	switch k := c.GetKind(); {
	case len(kinds) == 0, k == "", k == "resync":
		return true
	default:
		return slices.Contains(kinds, k)
	}
}
