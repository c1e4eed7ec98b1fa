package resourcemanager_test

import (
	"context"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// A handover is one write: the holder's Running and the pick that takes its
// slot land in one transaction (so a crash leaves both or neither), and the
// pick's write brings the config the submission needs, so nothing is read
// between the holder's pods running and the next job's submission.
func TestHandoverIsOneWrite(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	be.startPhase = resourcemanager.PhasePending
	conn := apitest.CountCalls(env.Conn)
	now := time.Now()
	mgr := resourcemanager.New(conn, resourcemanager.WithBackend("test", be), resourcemanager.WithClock(func() time.Time { return now }))
	cycle := func() {
		t.Helper()
		if _, err := mgr.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	task := &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
	j1 := env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": task}).GetJobs()[0].GetId()
	j2 := env.Create(t, "next", map[string]*falconv1.TaskSpec{"main": task}).GetJobs()[0].GetId()
	cycle()
	want(t, env.Job(t, j1), "Pending", "Dispatching", "")
	want(t, env.Job(t, j2), "Pending", "Waiting", "next in line")

	conn.Take()
	be.set(j1, resourcemanager.PhaseRunning, "1/1 pods running")
	cycle()
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
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	be.startPhase = resourcemanager.PhasePending
	conn := apitest.CountCalls(env.Conn)
	now := time.Now()
	mgr := resourcemanager.New(conn, resourcemanager.WithBackend("test", be), resourcemanager.WithClock(func() time.Time { return now }))
	cycle := func() {
		t.Helper()
		if _, err := mgr.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	task := &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
	var ids []string
	for _, name := range []string{"first", "second", "third", "fourth"} {
		ids = append(ids, env.Create(t, name, map[string]*falconv1.TaskSpec{"main": task}).GetJobs()[0].GetId())
	}
	cycle()
	be.set(ids[0], resourcemanager.PhaseRunning, "1/1 pods running")
	cycle()
	want(t, env.Job(t, ids[0]), "Running", "", "1/1 pods running")
	want(t, env.Job(t, ids[1]), "Pending", "Dispatching", "")

	conn.Take()
	be.set(ids[0], resourcemanager.PhaseSucceeded, "1/1 pods succeeded")
	be.set(ids[1], resourcemanager.PhaseRunning, "1/1 pods running")
	mgr.Touch(ids[0], ids[1])
	cycle()
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
// news for its user only: it goes in the cycle's batch, not in a write of
// its own ahead of everything else the cycle does.
func TestAHoldersProgressIsBatched(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "test"})
	be := newScripted()
	be.startPhase = resourcemanager.PhasePending
	conn := apitest.CountCalls(env.Conn)
	now := time.Now()
	mgr := resourcemanager.New(conn, resourcemanager.WithBackend("test", be), resourcemanager.WithClock(func() time.Time { return now }))
	task := &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
	id := env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": task}).GetJobs()[0].GetId()
	if _, err := mgr.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn.Take()
	be.set(id, resourcemanager.PhasePending, "0/1 pods running")
	mgr.Touch(id)
	if _, err := mgr.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	want(t, env.Job(t, id), "Pending", "Dispatching", "0/1 pods running")
	if calls := conn.Take(); calls["UpdateJobStatus"] != 0 || calls["UpdateJobStatuses"] != 1 {
		t.Errorf("the holder's progress took %d single and %d batch writes, want 0 and 1 (all calls: %v)",
			calls["UpdateJobStatus"], calls["UpdateJobStatuses"], calls)
	}
}
