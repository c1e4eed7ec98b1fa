package gke_test

import (
	"strings"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/resourcemanager"
)

// Under a pool cap of one, a second job of the shape waits as
// WaitingForPool while the first runs, and takes the first's pool the
// moment it falls free: no second pool is created, and the handover does
// not wait for a periodic resync (the manager here cycles only on changes:
// its interval and resync are an hour, so a job looked at only on resync
// would never run within the test).
func TestPoolCapHandsAFreedPoolOnAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{rmOpts: []resourcemanager.Option{
		resourcemanager.WithPoolCap(1), resourcemanager.WithInterval(time.Hour), resourcemanager.WithResync(time.Hour),
	}})
	first := f.submit(task(2 * time.Second))
	a := f.waitJob(first, "running", status("Running"))
	second := f.submit(task(time.Second))
	b := f.waitJob(second, "waiting for the pool", reason("WaitingForPool"))
	if !strings.Contains(b.GetMessage(), "the pool cap (cap=1)") {
		t.Errorf("capped job's message %q", b.GetMessage())
	}
	b = f.waitJob(second, "succeeded", status("Succeeded"))
	if b.GetNodePool() != a.GetNodePool() {
		t.Errorf("second job ran on %s, want the first's pool %s", b.GetNodePool(), a.GetNodePool())
	}
	if n := f.creates(); n != 1 {
		t.Errorf("%d node pool creates under cap=1, want 1", n)
	}
}
