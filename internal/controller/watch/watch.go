package watch

import (
	"context"
	"log/slog"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// Changes returns a channel that receives (coalesced) whenever the API server
// reports a change. It runs until ctx is done.
func Changes(ctx context.Context, jobs falconv1.JobServiceClient, log *slog.Logger) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			stream, err := jobs.WatchChanges(ctx, &falconv1.WatchChangesRequest{})
			if err == nil {
				for {
					if _, err = stream.Recv(); err != nil {
						break
					}
					backoff = 100 * time.Millisecond
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
