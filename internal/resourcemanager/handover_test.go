package resourcemanager_test

import (
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// slotTask needs a TPU slice, so its job holds its queue's slot until its
// pods run.
var slotTask = &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}

// slotSetup is setup with pods that start Pending: a job holds its slot
// until the test says its pods run.
func slotSetup(t *testing.T) *fixture {
	f := setup(t)
	f.be.startPhase = resourcemanager.PhasePending
	return f
}

// A handover is one write: the holder's Running and the pick that takes its
// slot land in one transaction (so a crash leaves both or neither), and the
// pick's write brings the config the submission needs, so nothing is read
// between the holder's pods running and the next job's submission.
func TestHandoverIsOneWrite(t *testing.T) {
	f := slotSetup(t)
	env, be, conn, task := f.env, f.be, f.calls, slotTask
	j1 := env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": task}).GetJobs()[0].GetId()
	j2 := env.Create(t, "next", map[string]*falconv1.TaskSpec{"main": task}).GetJobs()[0].GetId()
	f.cycle(t)
	want(t, env.Job(t, j1), "Pending", "Dispatching", "")
	want(t, env.Job(t, j2), "Pending", "Waiting", "next in line")

	conn.Take()
	be.set(j1, resourcemanager.PhaseRunning, "1/1 pods running")
	f.cycle(t)
	want(t, env.Job(t, j1), "Running", "", "1/1 pods running")
	want(t, env.Job(t, j2), "Pending", "Dispatching", "")
	calls := conn.Take()
	for _, c := range []struct {
		method string
		want   int
	}{
		{"UpdateJobStatuses", 1}, // the holder's Running and the pick, together
		{"UpdateJobStatus", 0},
		{"GetJob", 0}, // the config came with the pick's write
	} {
		if calls[c.method] != c.want {
			t.Errorf("%s called %d times during the handover, want %d (all calls: %v)", c.method, calls[c.method], c.want, calls)
		}
	}
	be.mu.Lock()
	got := be.dispatched[j2].GetConfig()
	be.mu.Unlock()
	if got != "cfg-next" {
		t.Errorf("the next job was submitted with config %q, want its experiment's %q", got, "cfg-next")
	}
}

// A job's end rides the handover's write too: the cycle that learns one
// job finished and its queue's holder runs records the end, the holder's
// Running, the next pick and the new next in line in one transaction, so
// the end reaches its experiment without waiting for the rest of the
// cycle; only the pick comes back with its config.
func TestAnEndRidesTheHandover(t *testing.T) {
	f := slotSetup(t)
	env, be, conn, task := f.env, f.be, f.calls, slotTask
	var ids []string
	for _, name := range []string{"first", "second", "third", "fourth"} {
		ids = append(ids, env.Create(t, name, map[string]*falconv1.TaskSpec{"main": task}).GetJobs()[0].GetId())
	}
	f.cycle(t)
	be.set(ids[0], resourcemanager.PhaseRunning, "1/1 pods running")
	f.cycle(t)
	want(t, env.Job(t, ids[0]), "Running", "", "1/1 pods running")
	want(t, env.Job(t, ids[1]), "Pending", "Dispatching", "")

	conn.Take()
	be.set(ids[0], resourcemanager.PhaseSucceeded, "1/1 pods succeeded")
	be.set(ids[1], resourcemanager.PhaseRunning, "1/1 pods running")
	f.mgr.Touch(ids[0], ids[1])
	f.cycle(t)
	want(t, env.Job(t, ids[0]), "Succeeded", "", "")
	want(t, env.Job(t, ids[1]), "Running", "", "1/1 pods running")
	want(t, env.Job(t, ids[2]), "Pending", "Dispatching", "")
	want(t, env.Job(t, ids[3]), "Pending", "Waiting", "next in line")
	reqs := conn.Requests("UpdateJobStatuses")
	calls := conn.Take()
	if calls["UpdateJobStatuses"] != 1 || calls["UpdateJobStatus"] != 0 {
		t.Errorf("the end, the handover, the pick and the position took %d batch and %d single writes, want 1 and 0 (all calls: %v)",
			calls["UpdateJobStatuses"], calls["UpdateJobStatus"], calls)
	}
	if len(reqs) != 1 {
		t.Fatalf("%d batches recorded, want 1", len(reqs))
	}
	for _, u := range reqs[0].(*falconv1.UpdateJobStatusesRequest).GetUpdates() {
		if got, want := u.GetWithConfig(), u.GetId() == ids[2]; got != want {
			t.Errorf("the update of %s (to %s %s) asks for its config: %t, want %t", u.GetId(), u.GetStatus(), u.GetReason(), got, want)
		}
	}
}

// A slot holder's progress while its pods start ("0/4 pods running") is
// news for its user only, and only once its pods have had a moment to
// run (progressGrace): reported sooner, it is not written (their Running
// would overwrite it), and then it goes in the cycle's batch, not in a
// write of its own ahead of everything else the cycle does.
func TestAHoldersProgressIsBatched(t *testing.T) {
	f := slotSetup(t)
	env, be, conn := f.env, f.be, f.calls
	id := env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	f.cycle(t)
	conn.Take()
	be.set(id, resourcemanager.PhasePending, "0/1 pods running")
	f.mgr.Touch(id)
	f.cycle(t)
	want(t, env.Job(t, id), "Pending", "Dispatching", "submitting to cluster")
	if calls := conn.Take(); calls["UpdateJobStatus"] != 0 || calls["UpdateJobStatuses"] != 0 {
		t.Errorf("the holder's progress, reported at once, took %d single and %d batch writes, want none (all calls: %v)",
			calls["UpdateJobStatus"], calls["UpdateJobStatuses"], calls)
	}
	// The grace over, the cycle due then writes it: no report needed.
	f.now = f.now.Add(5 * time.Second)
	f.cycle(t)
	want(t, env.Job(t, id), "Pending", "Dispatching", "0/1 pods running")
	if calls := conn.Take(); calls["UpdateJobStatus"] != 0 || calls["UpdateJobStatuses"] != 1 {
		t.Errorf("the holder's progress took %d single and %d batch writes, want 0 and 1 (all calls: %v)",
			calls["UpdateJobStatus"], calls["UpdateJobStatuses"], calls)
	}
}
