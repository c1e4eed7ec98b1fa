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

// A backend's report that arrives while a cycle is at other work is taken
// up between two of that cycle's steps (preempt): the holder's pods seen
// running while the cycle observes another job hand the slot over in that
// same cycle, not in the next one.
func TestReportTakenUpMidCycle(t *testing.T) {
	f := setup(t)
	f.be.startPhase = resourcemanager.PhasePending
	tpu := &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}
	_, other := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1})
	holder := f.env.Create(t, "holder", map[string]*falconv1.TaskSpec{"main": tpu}).GetJobs()[0].GetId()
	next := f.env.Create(t, "next", map[string]*falconv1.TaskSpec{"main": tpu}).GetJobs()[0].GetId()
	f.cycle(t)
	f.be.set(other, resourcemanager.PhaseRunning, "1/1 running")
	f.cycle(t)
	want(t, f.env.Job(t, other), "Running", "", "")
	want(t, f.env.Job(t, holder), "Pending", "Dispatching", "")
	want(t, f.env.Job(t, next), "Pending", "Waiting", "next in line")

	// The running job's observation comes after the cycle has looked at
	// the holder (still acquiring then); the holder's pods run meanwhile.
	f.be.mu.Lock()
	f.be.onObserve = func(j *falconv1.Job) {
		if j.GetId() != other {
			return
		}
		f.be.onObserve = nil
		f.be.phase[holder] = resourcemanager.Observation{Phase: resourcemanager.PhaseRunning, Message: "1/1 pods running"}
		f.mgr.Touch(holder)
	}
	f.be.mu.Unlock()
	f.cycle(t)
	want(t, f.env.Job(t, holder), "Running", "", "1/1 pods running")
	want(t, f.env.Job(t, next), "Pending", "Dispatching", "")
	f.be.mu.Lock()
	_, submitted := f.be.dispatched[next]
	f.be.mu.Unlock()
	if !submitted {
		t.Fatal("the next job of the queue was not submitted in the cycle that learned of the holder's pods")
	}
}
