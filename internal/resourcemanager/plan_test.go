package resourcemanager

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func planJob(status lifecycle.Status, reason lifecycle.Reason, timeout int32, mods ...func(*falconv1.Job)) *falconv1.Job {
	j := &falconv1.Job{Id: "j1", Status: string(status), Reason: string(reason), ClusterName: "edge-a",
		TaskSpec: &falconv1.TaskSpec{TimeoutSeconds: timeout}}
	for _, m := range mods {
		m(j)
	}
	return j
}

func startedAt(t time.Time) func(*falconv1.Job) {
	return func(j *falconv1.Job) { j.StartedAt = timestamppb.New(t) }
}

// check compares a decision with the one wanted, the message by substring
// (the messages carry errors whose wording belongs to their callers).
func check(t *testing.T, got, want decision) {
	t.Helper()
	if got.verb != want.verb || got.to != want.to || got.reason != want.reason || !got.deadline.Equal(want.deadline) ||
		!got.at.Equal(want.at) || !strings.Contains(got.message, want.message) {
		t.Errorf("got  %v\nwant %v (message containing %q)", got, decision{verb: want.verb, to: want.to, reason: want.reason, deadline: want.deadline, at: want.at}, want.message)
	}
}

func withAt(d decision, at time.Time) decision {
	d.at = at
	return d
}

// TestDecisionRequest: a decision's write carries its end's own time, and
// only an end carries one.
func TestDecisionRequest(t *testing.T) {
	j := planJob(lifecycle.Running, "", 0)
	for _, tc := range []struct {
		d    decision
		want *timestamppb.Timestamp
	}{
		{withAt(recorded(lifecycle.Succeeded, "", "done"), t0), timestamppb.New(t0)},
		{withAt(failed(lifecycle.ReasonJobFailed, "exit 3"), t0), timestamppb.New(t0)},
		{recorded(lifecycle.Succeeded, "", "done"), nil},
		{withAt(recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "0/1"), t0), nil},
	} {
		r := tc.d.request(j)
		if r.GetId() != "j1" || r.GetExpectedStatus() != "Running" || r.GetStatus() != string(tc.d.to) || r.GetReason() != string(tc.d.reason) || r.GetMessage() != tc.d.message {
			t.Errorf("%v: request %v", tc.d, r)
		}
		if !proto.Equal(r.GetFinishedAt(), tc.want) {
			t.Errorf("%v: finished_at %v, want %v", tc.d, r.GetFinishedAt(), tc.want)
		}
		if r.GetStartedAt() != nil {
			t.Errorf("%v: started_at %v on what is no start", tc.d, r.GetStartedAt())
		}
	}
	r := withAt(recorded(lifecycle.Running, "", "1/1"), t0).request(planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0))
	if !proto.Equal(r.GetStartedAt(), timestamppb.New(t0)) || r.GetFinishedAt() != nil {
		t.Errorf("a start's request: started_at %v, finished_at %v; want started_at %v only", r.GetStartedAt(), r.GetFinishedAt(), t0)
	}
}

func TestPlanAcquiring(t *testing.T) {
	down := errors.New("dial tcp: connection refused")
	cases := []struct {
		name string
		f    acquiringFacts
		want decision
	}{
		{"proceeds without a timeout",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0), registered: true, since: t0, now: t0},
			decision{verb: proceed}},
		{"proceeds until its timeout, to be looked at then",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonProvisioning, 600), registered: true, since: t0, now: t0.Add(time.Minute)},
			decision{verb: proceed, deadline: t0.Add(10 * time.Minute)}},
		{"a timeout counted from when acquiring began stops and fails it",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonProvisioning, 600), cluster: "edge-a", registered: true, since: t0, now: t0.Add(10 * time.Minute)},
			decision{verb: stopThenRecord, to: lifecycle.Failed, reason: lifecycle.ReasonTimeout, message: "timed out after 600s waiting for resources on edge-a"}},
		{"no known start sets no deadline",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 600), registered: true, now: t0},
			decision{verb: proceed}},
		{"a deleted cluster fails it at once",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0), cluster: "edge-a", now: t0},
			decision{verb: record, to: lifecycle.Failed, reason: lifecycle.ReasonJobSubmitFailed, message: "cluster edge-a is no longer registered"}},
		{"a backend this controller does not run keeps it",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0), registered: true, unusable: errors.New("no backend"), now: t0},
			decision{verb: keep}},
		{"a cluster backing off keeps the slot and says why",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonProvisioning, 600), cluster: "edge-a", registered: true,
				health: Health{Err: down, Backoff: true}, since: t0, now: t0.Add(20 * time.Minute)},
			decision{verb: record, to: lifecycle.Pending, reason: lifecycle.ReasonProvisioning, message: "cluster edge-a is unreachable, retrying: dial tcp"}},
		{"a dispatch failing within its window, its next try due, proceeds",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0), registered: true, retry: DefaultRetry.Dispatch,
				failing: &backoff{since: t0, next: t0.Add(4 * time.Minute), attempts: 9, lastErr: down}, now: t0.Add(5*time.Minute - time.Second)},
			decision{verb: proceed}},
		{"a dispatch that failed a moment ago waits for its next try",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0), registered: true, retry: DefaultRetry.Dispatch,
				failing: &backoff{since: t0, next: t0.Add(4 * time.Second), attempts: 3, lastErr: down}, now: t0.Add(time.Second)},
			decision{verb: keep, deadline: t0.Add(4 * time.Second)}},
		{"waiting for its next try, it is still looked at at its timeout if that comes first",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 600), registered: true, retry: DefaultRetry.Dispatch,
				failing: &backoff{since: t0.Add(9 * time.Minute), next: t0.Add(10*time.Minute + 30*time.Second), attempts: 6, lastErr: down},
				since:   t0, now: t0.Add(9*time.Minute + 50*time.Second)},
			decision{verb: keep, deadline: t0.Add(10 * time.Minute)}},
		{"a dispatch failing for its window gives up, even while the cluster backs off",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0), cluster: "edge-a", registered: true, retry: DefaultRetry.Dispatch,
				failing: &backoff{since: t0, next: t0.Add(5*time.Minute + time.Second), attempts: 14, lastErr: down},
				health:  Health{Err: down, Backoff: true}, now: t0.Add(5 * time.Minute)},
			decision{verb: giveUp, to: lifecycle.Failed, reason: lifecycle.ReasonJobSubmitFailed, message: "submit to cluster edge-a failed for 5m0s (14 attempts): dial tcp"}},
		{"the window is the policy's",
			acquiringFacts{job: planJob(lifecycle.Pending, lifecycle.ReasonDispatching, 0), cluster: "edge-a", registered: true,
				retry:   RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, Window: 10 * time.Second},
				failing: &backoff{since: t0, next: t0.Add(11 * time.Second), attempts: 12, lastErr: down}, now: t0.Add(10 * time.Second)},
			decision{verb: giveUp, to: lifecycle.Failed, reason: lifecycle.ReasonJobSubmitFailed, message: "failed for 10s (12 attempts)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, planAcquiring(tc.f), tc.want) })
	}
}

func TestPlanObserved(t *testing.T) {
	cases := []struct {
		obs  Observation
		want decision
	}{
		{Observation{Phase: PhasePending, Message: "1/4 pods running"}, recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "1/4 pods running")},
		{Observation{Phase: PhaseUnknown}, recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "")},
		{Observation{Phase: PhaseRunning, Message: "4/4 pods running"}, recorded(lifecycle.Running, "", "4/4 pods running")},
		{Observation{Phase: PhaseSucceeded, Message: "4/4 pods succeeded"}, recorded(lifecycle.Succeeded, "", "4/4 pods succeeded")},
		{Observation{Phase: PhaseFailed, Message: "pod p-0 terminated: Error (exit code 3)"}, failed(lifecycle.ReasonJobFailed, "exit code 3")},
		// A start or an end the cluster dates is recorded at its own time;
		// progress is not dated.
		{Observation{Phase: PhaseSucceeded, At: t0}, withAt(recorded(lifecycle.Succeeded, "", ""), t0)},
		{Observation{Phase: PhaseFailed, At: t0}, withAt(failed(lifecycle.ReasonJobFailed, ""), t0)},
		{Observation{Phase: PhaseRunning, At: t0}, withAt(recorded(lifecycle.Running, "", ""), t0)},
		{Observation{Phase: PhasePending, At: t0}, recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "")},
	}
	for _, tc := range cases {
		t.Run(string(tc.obs.Phase), func(t *testing.T) { check(t, planObserved(tc.obs), tc.want) })
	}
}

func TestPlanDispatch(t *testing.T) {
	transient := &RetryableError{Err: errors.New("apiserver overloaded")}
	p := DefaultRetry.Dispatch
	cases := []struct {
		name        string
		err         error
		failing     *backoff
		policy      RetryPolicy
		now         time.Time
		want        decision
		wantFailing *backoff // since, next and attempts compared
	}{
		{"landed", nil, nil, p, t0, decision{verb: proceed}, nil},
		{"landed after failures forgets them", nil, &backoff{since: t0, attempts: 2}, p, t0, decision{verb: proceed}, nil},
		{"the job changed meanwhile", &changedError{errors.New("job j1 changed to Aborting")}, nil, p, t0, decision{verb: keep}, nil},
		{"no connection can be built fails at once",
			&UnusableError{Err: errors.New("kubeconfig /etc/x: no such file")}, nil, p, t0,
			recorded(lifecycle.Failed, lifecycle.ReasonJobSubmitFailed, "nothing was created there (fix the cluster's registration"), nil},
		{"a first transient failure is tried again after the policy's first wait, the Message naming the error and when",
			transient, nil, p, t0,
			recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "submitting to cluster edge-a failed (attempt 1), retrying in 1s, for up to 5m0s: apiserver overloaded"),
			&backoff{since: t0, next: t0.Add(time.Second), attempts: 1}},
		{"a later one keeps the first failure's time and doubles the wait",
			transient, &backoff{since: t0, interval: 4 * time.Second, attempts: 3}, p, t0.Add(time.Minute),
			recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "(attempt 4), retrying in 8s"),
			&backoff{since: t0, next: t0.Add(time.Minute + 8*time.Second), attempts: 4}},
		{"the wait stops growing at the policy's max",
			transient, &backoff{since: t0, interval: 30 * time.Second, attempts: 9}, p, t0.Add(2 * time.Minute),
			recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "(attempt 10), retrying in 30s"),
			&backoff{since: t0, next: t0.Add(2*time.Minute + 30*time.Second), attempts: 10}},
		{"transient for the whole window fails it",
			transient, &backoff{since: t0, interval: 30 * time.Second, attempts: 12}, p, t0.Add(5 * time.Minute),
			failed(lifecycle.ReasonJobSubmitFailed, "submit to cluster edge-a failed for 5m0s (13 attempts): apiserver overloaded"),
			&backoff{since: t0, next: t0.Add(5*time.Minute + 30*time.Second), attempts: 13}},
		{"another policy paces it otherwise",
			transient, nil, RetryPolicy{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Window: 10 * time.Second}, t0,
			recorded(lifecycle.Pending, lifecycle.ReasonDispatching, "(attempt 1), retrying in 200ms, for up to 10s"),
			&backoff{since: t0, next: t0.Add(200 * time.Millisecond), attempts: 1}},
		{"a refusal that cannot pass fails at once with the cluster's words",
			errors.New(`Job.batch "x" is invalid: spec.template.spec.containers[0].image: Required value`), nil, p, t0,
			failed(lifecycle.ReasonJobSubmitFailed, "submit to cluster edge-a failed: Job.batch \"x\" is invalid"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before backoff
			if tc.failing != nil {
				before = *tc.failing
			}
			got, f := planDispatch("edge-a", tc.err, tc.failing, tc.policy, tc.now)
			check(t, got, tc.want)
			if tc.failing != nil && *tc.failing != before {
				t.Errorf("the record it was given changed: %+v, was %+v", *tc.failing, before)
			}
			switch w := tc.wantFailing; {
			case (f == nil) != (w == nil):
				t.Errorf("failure record %+v, want %+v", f, w)
			case f != nil && (!f.since.Equal(w.since) || !f.next.Equal(w.next) || f.attempts != w.attempts || f.lastErr != tc.err):
				t.Errorf("failure record %+v, want since %v, next %v, %d attempts, the error", *f, w.since, w.next, w.attempts)
			}
		})
	}
}

func TestPlanRunning(t *testing.T) {
	cases := []struct {
		name string
		f    runningFacts
		want decision
	}{
		{"proceeds without a timeout", runningFacts{job: planJob(lifecycle.Running, "", 0, startedAt(t0)), now: t0.Add(time.Hour)}, decision{verb: proceed}},
		{"proceeds until its timeout", runningFacts{job: planJob(lifecycle.Running, "", 60, startedAt(t0)), now: t0.Add(time.Second)},
			decision{verb: proceed, deadline: t0.Add(time.Minute)}},
		{"its timeout passed: stopped and failed", runningFacts{job: planJob(lifecycle.Running, "", 60, startedAt(t0)), now: t0.Add(time.Minute)},
			failed(lifecycle.ReasonTimeout, "timed out after 60s; the job was stopped")},
		{"a cluster backing off leaves even a timeout for when it answers",
			runningFacts{job: planJob(lifecycle.Running, "", 60, startedAt(t0)), health: Health{Err: errors.New("refused"), Backoff: true}, now: t0.Add(time.Hour)},
			decision{verb: keep}},
		{"a backend this controller does not run", runningFacts{job: planJob(lifecycle.Running, "", 0, startedAt(t0)), unusable: errors.New("no backend"), now: t0}, decision{verb: keep}},
		{"no start recorded sets no deadline", runningFacts{job: planJob(lifecycle.Running, "", 60), now: t0}, decision{verb: proceed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, planRunning(tc.f), tc.want) })
	}
}

func TestPlanPassThrough(t *testing.T) {
	check(t, planPassThrough(Observation{Phase: PhaseSucceeded, At: t0.Add(time.Minute), Began: t0}), withAt(recorded(lifecycle.Running, "", ""), t0))
	check(t, planPassThrough(Observation{Phase: PhaseSucceeded, At: t0}), recorded(lifecycle.Running, "", ""))
}

func TestPlanRunningObserved(t *testing.T) {
	cases := []struct {
		obs  Observation
		want decision
	}{
		{Observation{Phase: PhaseRunning, Message: "4/4 pods running"}, recorded(lifecycle.Running, "", "4/4 pods running")},
		{Observation{Phase: PhasePending, Message: "3/4 pods running; pod p-2 unschedulable"}, recorded(lifecycle.Running, "", "pod p-2 unschedulable")},
		{Observation{Phase: PhaseSucceeded, Message: "4/4 pods succeeded"}, recorded(lifecycle.Succeeded, "", "4/4 pods succeeded")},
		{Observation{Phase: PhaseFailed, Message: "pod p-1 terminated: OOMKilled (exit code 137)"}, failed(lifecycle.ReasonJobFailed, "OOMKilled")},
		{Observation{Phase: PhaseUnknown}, failed(lifecycle.ReasonJobFailed, "the job's processes are gone and its outcome is unknown")},
		{Observation{Phase: PhaseUnknown, Message: "process 4242 is gone"}, failed(lifecycle.ReasonJobFailed, "process 4242 is gone")},
		{Observation{Phase: PhaseSucceeded, Message: "dated", At: t0}, withAt(recorded(lifecycle.Succeeded, "", "dated"), t0)},
		{Observation{Phase: PhaseFailed, Message: "dated", At: t0}, withAt(failed(lifecycle.ReasonJobFailed, "dated"), t0)},
		// A Running job's news is no start of it.
		{Observation{Phase: PhasePending, Message: "dated", At: t0}, recorded(lifecycle.Running, "", "dated")},
		{Observation{Phase: PhaseRunning, Message: "dated", At: t0}, recorded(lifecycle.Running, "", "dated")},
	}
	for _, tc := range cases {
		t.Run(string(tc.obs.Phase)+"/"+tc.obs.Message, func(t *testing.T) { check(t, planRunningObserved(tc.obs), tc.want) })
	}
}

func TestPlanAbort(t *testing.T) {
	dispatched := func(j *falconv1.Job) { j.DispatchedAt = timestamppb.New(t0) }
	cases := []struct {
		name      string
		j         *falconv1.Job
		submitted bool
		want      decision
	}{
		{"never reached its cluster: no stop", planJob(lifecycle.Aborting, "", 0), false, recorded(lifecycle.Aborted, "", "aborted")},
		{"pinned but never dispatched: no stop, the message kept",
			planJob(lifecycle.Aborting, "", 0, func(j *falconv1.Job) { j.Message = "aborted by ana@example.com" }), false,
			recorded(lifecycle.Aborted, "", "aborted by ana@example.com")},
		{"submitted by the deck, not recorded yet: stopped first", planJob(lifecycle.Aborting, "", 0), true,
			decision{verb: stopThenRecord, to: lifecycle.Aborted, message: "aborted"}},
		{"acquiring: stopped first", planJob(lifecycle.Aborting, "", 0, dispatched), false, decision{verb: stopThenRecord, to: lifecycle.Aborted, message: "aborted"}},
		{"running: stopped first", planJob(lifecycle.Aborting, "", 0, startedAt(t0)), false, decision{verb: stopThenRecord, to: lifecycle.Aborted, message: "aborted"}},
		{"holding a pool: stopped first", planJob(lifecycle.Aborting, "", 0, func(j *falconv1.Job) { j.NodePool = "falcon-j1" }), false,
			decision{verb: stopThenRecord, to: lifecycle.Aborted, message: "aborted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, planAbort(tc.j, tc.submitted), tc.want) })
	}
}

func TestPlanStopOutcome(t *testing.T) {
	refused := errors.New("connection refused")
	cases := []struct {
		name         string
		prev         *backoff
		policy       *RetryPolicy // nil: DefaultRetry.Stop
		err          error
		backingOff   bool
		now          time.Time
		wantDone     bool
		wantMsg      string
		wantAttempts int
		wantNext     time.Time
		wantNil      bool
	}{
		{name: "stopped", err: nil, now: t0, wantDone: true, wantMsg: "aborted", wantNil: true},
		{name: "stopped after failures forgets them", prev: &backoff{since: t0, attempts: 3}, now: t0.Add(time.Minute), wantDone: true, wantMsg: "aborted", wantNil: true},
		{name: "a first failure waits one second", err: refused, now: t0, wantMsg: "aborted", wantAttempts: 1, wantNext: t0.Add(time.Second)},
		{name: "the interval doubles", prev: &backoff{since: t0, interval: 4 * time.Second, attempts: 3}, err: refused, now: t0.Add(10 * time.Second),
			wantMsg: "aborted", wantAttempts: 4, wantNext: t0.Add(18 * time.Second)},
		{name: "at most 30 s", prev: &backoff{since: t0, interval: 30 * time.Second, attempts: 9}, err: refused, now: t0.Add(time.Minute),
			wantMsg: "aborted", wantAttempts: 10, wantNext: t0.Add(90 * time.Second)},
		{name: "a backend backing off paces itself: not an attempt", prev: &backoff{since: t0, interval: time.Second, attempts: 1, next: t0.Add(time.Second)},
			err: refused, backingOff: true, now: t0.Add(2 * time.Second), wantMsg: "aborted", wantAttempts: 1, wantNext: t0.Add(time.Second)},
		{name: "never confirmed within the window: the outcome is recorded, saying so", prev: &backoff{since: t0, interval: 30 * time.Second, attempts: 12},
			err: refused, now: t0.Add(5 * time.Minute), wantDone: true,
			wantMsg:      "aborted; cluster edge-a never confirmed the stop (13 attempts over 5m0s): connection refused; anything the job started there may still be running",
			wantAttempts: 13, wantNext: t0.Add(5*time.Minute + 30*time.Second)},
		{name: "another policy: its first wait", policy: &RetryPolicy{Initial: 250 * time.Millisecond, Max: time.Second, Window: 5 * time.Second},
			err: refused, now: t0, wantMsg: "aborted", wantAttempts: 1, wantNext: t0.Add(250 * time.Millisecond)},
		{name: "another policy: its max", policy: &RetryPolicy{Initial: 250 * time.Millisecond, Max: time.Second, Window: 5 * time.Second},
			prev: &backoff{since: t0, interval: time.Second, attempts: 4}, err: refused, now: t0.Add(3 * time.Second),
			wantMsg: "aborted", wantAttempts: 5, wantNext: t0.Add(4 * time.Second)},
		{name: "another policy: its window", policy: &RetryPolicy{Initial: 250 * time.Millisecond, Max: time.Second, Window: 5 * time.Second},
			prev: &backoff{since: t0, interval: time.Second, attempts: 7}, err: refused, now: t0.Add(5 * time.Second), wantDone: true,
			wantMsg:      "aborted; cluster edge-a never confirmed the stop (8 attempts over 5s): connection refused; anything the job started there may still be running",
			wantAttempts: 8, wantNext: t0.Add(6 * time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before backoff
			if tc.prev != nil {
				before = *tc.prev
			}
			p := DefaultRetry.Stop
			if tc.policy != nil {
				p = *tc.policy
			}
			done, msg, st := planStopOutcome("edge-a", "aborted", tc.prev, tc.err, tc.backingOff, p, tc.now)
			if done != tc.wantDone || msg != tc.wantMsg {
				t.Errorf("done %v %q, want %v %q", done, msg, tc.wantDone, tc.wantMsg)
			}
			if tc.prev != nil && *tc.prev != before {
				t.Errorf("the backoff it was given changed: %+v, was %+v", *tc.prev, before)
			}
			if tc.wantNil {
				if st != nil {
					t.Errorf("backoff %+v, want none", *st)
				}
				return
			}
			if st == nil || st.attempts != tc.wantAttempts || !st.next.Equal(tc.wantNext) || st.lastErr != tc.err {
				t.Errorf("backoff %+v, want %d attempts, next %v", st, tc.wantAttempts, tc.wantNext)
			}
		})
	}
	if next, wait := stopWait(&backoff{next: t0.Add(time.Second)}, t0); !wait || !next.Equal(t0.Add(time.Second)) {
		t.Errorf("stopWait before next = %v %v, want wait until next", next, wait)
	}
	if _, wait := stopWait(&backoff{next: t0}, t0); wait {
		t.Error("stopWait at next waits")
	}
	if _, wait := stopWait(nil, t0); wait {
		t.Error("stopWait without a backoff waits")
	}
}

func TestPlanPositions(t *testing.T) {
	s := queue.New(queue.WithClock(func() time.Time { return t0 }))
	cands := []queue.Cluster{{Name: "edge-a", Active: true, Accelerators: map[string]int{"v5p": 0}}}
	jobs := map[string]*falconv1.Job{}
	var key queue.Key
	for i := range 25 {
		id := fmt.Sprintf("j%02d", i)
		k, err := s.Enqueue(queue.Job{ID: id, Actor: "ana", AcceleratorType: "v5p", Topology: "v5p:2x2x1", Created: t0.Add(time.Duration(i) * time.Second)}, cands)
		if err != nil {
			t.Fatal(err)
		}
		key = k
		jobs[id] = &falconv1.Job{Id: id, Status: string(lifecycle.Pending), Reason: string(lifecycle.ReasonWaiting)}
	}
	waiting := s.Waiting(key)
	all := map[string]int{}
	for _, p := range waiting {
		all[p.ID] = p.Pos
	}
	ids := func(ws []positionWrite) string {
		var out []string
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%s@%d", w.job.GetId(), w.pos))
		}
		return strings.Join(out, " ")
	}

	// Never written: every job gets its position.
	got := planPositions(queueFacts{cluster: "edge-a", waiting: waiting, jobs: jobs, written: map[string]int{}})
	if len(got) != 25 || got[0].pos != 1 || got[24].pos != 25 || got[0].msg != waiting[0].Message() {
		t.Fatalf("first write: %s", ids(got))
	}
	// Written before, nothing due: only the next in line (the messages are
	// not yet on the rows here, so every one differs).
	got = planPositions(queueFacts{cluster: "edge-a", waiting: waiting, jobs: jobs, written: all})
	if len(got) != 1 || got[0].pos != 1 {
		t.Fatalf("written, nothing due: %s", ids(got))
	}
	// The front due, the tail not: the front exactPositions.
	got = planPositions(queueFacts{cluster: "edge-a", waiting: waiting, jobs: jobs, written: all, refreshNear: true})
	if len(got) != exactPositions || got[len(got)-1].pos != exactPositions {
		t.Fatalf("front due, tail not: %s", ids(got))
	}
	// The tail due: everything again.
	if got = planPositions(queueFacts{cluster: "edge-a", waiting: waiting, jobs: jobs, written: all, refreshTail: true}); len(got) != 25 {
		t.Fatalf("tail due: %s", ids(got))
	}
	// Rows already saying it: nothing. An unreachable cluster: every
	// message gains the note.
	for _, p := range waiting {
		jobs[p.ID].Message = p.Message()
	}
	if got = planPositions(queueFacts{cluster: "edge-a", waiting: waiting, jobs: jobs, written: all, refreshTail: true}); len(got) != 0 {
		t.Fatalf("rows up to date: %s", ids(got))
	}
	got = planPositions(queueFacts{cluster: "edge-a", waiting: waiting, jobs: jobs, written: all, refreshTail: true, unreachable: errors.New("i/o timeout")})
	if len(got) != 25 || !strings.HasSuffix(got[3].msg, "; cluster edge-a is unreachable: i/o timeout") {
		t.Fatalf("unreachable: %d writes, %q", len(got), got[3].msg)
	}
	// A job that left Pending or holds the slot is not told a position.
	jobs["j00"].Status = string(lifecycle.Aborting)
	jobs["j01"].Reason = string(lifecycle.ReasonDispatching)
	jobs["j01"].ClusterName = "edge-a"
	delete(jobs, "j02")
	got = planPositions(queueFacts{cluster: "edge-a", waiting: waiting, jobs: jobs, written: map[string]int{}, unreachable: errors.New("x")})
	if len(got) != 22 || got[0].job.GetId() != "j03" {
		t.Fatalf("left Pending, acquiring, gone: %s", ids(got))
	}
}

func TestPlanPools(t *testing.T) {
	v5p := func(name, topo string, st lifecycle.PoolState, age time.Duration) Pool {
		return Pool{Name: name, AcceleratorType: "v5p", Topology: topo, State: st, CreatedAt: t0.Add(-age)}
	}
	shape := func(topo string) queue.Pool { return queue.Pool{AcceleratorType: "v5p", Topology: topo} }
	grace := 10 * time.Minute
	cases := []struct {
		name    string
		f       PoolFacts
		want    []PoolVerb
		due     []time.Time
		noReuse bool
	}{
		{"owned pools stay, whatever their state",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour), v5p("b", "2x2x1", lifecycle.PoolProvisioning, time.Minute)},
				Owner: map[string]string{"a": "j1", "b": "j2"}},
			[]PoolVerb{PoolOwned, PoolOwned}, nil, false},
		{"an idle ready pool nobody waits for is deleted",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour)}},
			[]PoolVerb{PoolDelete}, nil, false},
		{"one waiting job keeps one pool of its shape, the oldest",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, 2*time.Hour), v5p("b", "2x2x1", lifecycle.PoolReady, time.Hour)},
				Demand: map[queue.Pool]int{shape("2x2x1"): 1}},
			[]PoolVerb{PoolKept, PoolDelete}, nil, false},
		{"a waiting job of another shape keeps nothing",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour)}, Demand: map[queue.Pool]int{shape("2x2x4"): 3}},
			[]PoolVerb{PoolDelete}, nil, false},
		{"a young pool still being created is kept until its grace ends",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolProvisioning, time.Minute)}},
			[]PoolVerb{PoolKept}, []time.Time{t0.Add(grace - time.Minute)}, false},
		{"an old one nobody waits for is deleted",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolProvisioning, time.Hour)}},
			[]PoolVerb{PoolDelete}, nil, false},
		{"an old one still being created is kept for a waiting job",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x4", lifecycle.PoolProvisioning, time.Hour)}, Demand: map[queue.Pool]int{shape("2x2x4"): 1}},
			[]PoolVerb{PoolKept}, nil, false},
		{"a pool being deleted is left alone and keeps nothing's turn",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolDeleting, time.Hour), v5p("b", "2x2x1", lifecycle.PoolReady, time.Minute)},
				Demand: map[queue.Pool]int{shape("2x2x1"): 1}},
			[]PoolVerb{PoolDeleting, PoolKept}, nil, false},
		{"a failed pool is deleted even when wanted",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolFailed, time.Minute)}, Demand: map[queue.Pool]int{shape("2x2x1"): 1}},
			[]PoolVerb{PoolDelete}, nil, false},
		{"with linger an idle ready pool nobody waits for is kept until its linger ends",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour)}, Linger: 30 * time.Minute,
				IdleSince: map[string]time.Time{"a": t0.Add(-10 * time.Minute)}},
			[]PoolVerb{PoolKept}, []time.Time{t0.Add(20 * time.Minute)}, false},
		{"with linger a pool that just fell idle lingers from now",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour)}, Linger: 30 * time.Minute},
			[]PoolVerb{PoolKept}, []time.Time{t0.Add(30 * time.Minute)}, false},
		{"with linger a pool idle for longer is deleted",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour)}, Linger: 30 * time.Minute,
				IdleSince: map[string]time.Time{"a": t0.Add(-30 * time.Minute)}},
			[]PoolVerb{PoolDelete}, nil, false},
		{"linger does not keep a pool still being created past its grace",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolProvisioning, time.Hour)}, Linger: 30 * time.Minute},
			[]PoolVerb{PoolDelete}, nil, false},
		{"linger keeps nothing without reuse",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour)}, Linger: 30 * time.Minute},
			[]PoolVerb{PoolDelete}, nil, true},
		{"without reuse every idle ready pool is deleted",
			PoolFacts{Pools: []Pool{v5p("a", "2x2x1", lifecycle.PoolReady, time.Hour)}, Demand: map[queue.Pool]int{shape("2x2x1"): 1}},
			[]PoolVerb{PoolDelete}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Now, tc.f.Grace, tc.f.NoReuse = t0, grace, tc.noReuse
			before := fmt.Sprint(tc.f.Demand)
			got := PlanPools(tc.f)
			if len(got) != len(tc.want) {
				t.Fatalf("%d decisions, want %d", len(got), len(tc.want))
			}
			for i, d := range got {
				var due time.Time
				if i < len(tc.due) {
					due = tc.due[i]
				}
				if d.Verb != tc.want[i] || !d.Deadline.Equal(due) || d.Pool.Name != tc.f.Pools[i].Name {
					t.Errorf("pool %s: %d until %v, want %d until %v", d.Pool.Name, d.Verb, d.Deadline, tc.want[i], due)
				}
			}
			if fmt.Sprint(tc.f.Demand) != before {
				t.Errorf("demand changed: %v, was %v", tc.f.Demand, before)
			}
		})
	}
}

func TestPlanUnplaceable(t *testing.T) {
	probed := &queue.Probe{Reachable: true, ProbedAt: t0}
	down := &queue.Probe{Error: "probe timed out after 3s", ProbedAt: t0}
	offers := func(name, typ string, active bool, max int, p *queue.Probe) queue.Cluster {
		return queue.Cluster{Name: name, Active: active, Accelerators: map[string]int{typ: -1}, MaxQueueDepth: max, Probe: p}
	}
	cases := []struct {
		name     string
		clusters []queue.Cluster
		depth    int // of every queue
		pin      string
		policy   queue.Policy
		want     decision
	}{
		{name: "no cluster offers the type: failed at once, every probe named",
			clusters: []queue.Cluster{offers("edge-a", "v6e", true, 0, probed), offers("edge-b", "v6e", false, 0, nil)},
			want: decision{verb: record, to: lifecycle.Failed, reason: lifecycle.ReasonJobSubmitFailed,
				message: "no cluster supports v7x: edge-a: does not offer v7x; reachable, queue_depth=0, running=0 (probed 2026-12-01T12:00:00Z); edge-b: not active; never probed; register a cluster"}},
		{name: "no cluster registered: failed at once",
			want: decision{verb: record, to: lifecycle.Failed, reason: lifecycle.ReasonJobSubmitFailed, message: "no cluster supports v7x: no cluster is registered"}},
		{name: "pinned to a cluster that no longer offers the type: failed",
			clusters: []queue.Cluster{offers("edge-a", "v6e", true, 0, probed), offers("edge-b", "v7x", true, 0, probed)}, pin: "edge-a",
			want: decision{verb: record, to: lifecycle.Failed, reason: lifecycle.ReasonJobSubmitFailed, message: "edge-b: the job is pinned to edge-a"}},
		{name: "the only cluster offering it is not active: waits, saying so",
			clusters: []queue.Cluster{offers("edge-a", "v7x", false, 0, probed), offers("edge-b", "v6e", true, 0, probed)},
			want: decision{verb: record, to: lifecycle.Pending, reason: lifecycle.ReasonWaiting,
				message: "no active cluster offers v7x (edge-a: not active); the job waits until one can take it"}},
		{name: "its queue is full: waits",
			clusters: []queue.Cluster{offers("edge-a", "v7x", true, 1, probed)}, depth: 1,
			want: decision{verb: record, to: lifecycle.Pending, reason: lifecycle.ReasonWaiting,
				message: "all clusters offering v7x are at max queue depth for 2x2x4 (edge-a: queue for 2x2x4 is full: 1 waiting or acquiring, max 1); the job waits"}},
		{name: "priority, every candidate unreachable: waits with 001's text",
			clusters: []queue.Cluster{offers("edge-a", "v7x", true, 0, down)}, policy: queue.PolicyPriority,
			want: decision{verb: record, to: lifecycle.Pending, reason: lifecycle.ReasonWaiting,
				message: "no available cluster for v7x 2x2x4: edge-a: unreachable; unreachable: probe timed out after 3s (probed 2026-12-01T12:00:00Z); the job waits"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := queue.Job{ID: "j1", Actor: "ana", AcceleratorType: "v7x", Topology: "2x2x4", PinnedCluster: tc.pin, Created: t0}
			sel, err := queue.Explain(job, tc.clusters, func(queue.Key) int { return tc.depth }, tc.policy, t0)
			var u *queue.UnplaceableError
			if !errors.As(err, &u) {
				t.Fatalf("Explain placed the job (%v, %v); the row needs a selection that fails", sel.Selected, err)
			}
			check(t, planUnplaceable(sel, u, tc.pin), tc.want)
		})
	}
}

func TestPlanPoolFailure(t *testing.T) {
	stockout := &PoolError{Reason: lifecycle.ReasonNodePoolFailed, Message: "ZONE_RESOURCE_POOL_EXHAUSTED"}
	cases := []struct {
		name     string
		tookOver bool
		want     string
	}{
		{"its own pool's failure fails the job", false, `stopThenRecord Failed/NodePoolFailed "ZONE_RESOURCE_POOL_EXHAUSTED"`},
		{"a pool taken over is replaced", true, `proceed "node pool p1, taken over from a job that ended, failed (ZONE_RESOURCE_POOL_EXHAUSTED); "`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := planPoolFailure(stockout, "p1", tc.tookOver).String(); got != tc.want {
				t.Fatalf("planPoolFailure = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPlanLeftover(t *testing.T) {
	cases := []struct {
		name                  string
		row                   *falconv1.Job
		found, pooled, active bool
		want                  bool
	}{
		{"a live job is the cycle's", planJob(lifecycle.Running, "", 0), true, true, true, false},
		{"an aborting job is the cycle's", planJob(lifecycle.Aborting, "", 0), true, false, true, false},
		{"a deleted experiment's objects go", nil, false, false, false, true},
		{"pooled: an ended job's objects go", planJob(lifecycle.Succeeded, "", 0), true, true, false, true},
		{"pooled: an aborted job's go", planJob(lifecycle.Aborted, "", 0), true, true, true, true},
		{"unpooled: a finished Job is kept for its user", planJob(lifecycle.Failed, lifecycle.ReasonJobFailed, 0), true, false, false, false},
		{"unpooled: a forced abort's running Job goes", planJob(lifecycle.Aborted, "", 0), true, false, true, true},
		{"unpooled: a failure's unconfirmed stop goes", planJob(lifecycle.Failed, lifecycle.ReasonTimeout, 0), true, false, true, true},
		{"unpooled: a success is never cut short", planJob(lifecycle.Succeeded, "", 0), true, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := planLeftover(tc.row, tc.found, tc.pooled, tc.active); got != tc.want {
				t.Fatalf("planLeftover = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestPlanLeftoverRetry(t *testing.T) {
	refused := errors.New("connection refused")
	cases := []struct {
		name         string
		prev         *backoff
		wantAttempts int
		wantNext     time.Time
	}{
		{"a first failure waits one second", nil, 1, t0.Add(time.Second)},
		{"the interval doubles", &backoff{since: t0, interval: 8 * time.Second, attempts: 4}, 5, t0.Add(16 * time.Second)},
		{"at most five minutes", &backoff{since: t0, interval: 4 * time.Minute, attempts: 9}, 10, t0.Add(5 * time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before backoff
			if tc.prev != nil {
				before = *tc.prev
			}
			got := planLeftoverRetry(tc.prev, refused, t0)
			if got.attempts != tc.wantAttempts || !got.next.Equal(tc.wantNext) || got.lastErr != refused {
				t.Fatalf("got attempts %d next %v err %v, want %d %v", got.attempts, got.next, got.lastErr, tc.wantAttempts, tc.wantNext)
			}
			if tc.prev != nil && *tc.prev != before {
				t.Fatal("planLeftoverRetry changed what it was given")
			}
		})
	}
}

// The deck hands a slot over on exactly what makes planObserved move the
// holder out of Dispatching: the two must never disagree.
func TestReleasesIsPlanObservedsRule(t *testing.T) {
	for _, p := range []Phase{PhaseUnknown, PhasePending, PhaseRunning, PhaseSucceeded, PhaseFailed} {
		obs := Observation{Phase: p, Message: "m"}
		stays := planObserved(obs).to == lifecycle.Pending
		if releases(obs) == stays {
			t.Errorf("phase %s: releases = %v, but planObserved keeps it Pending = %v", p, releases(obs), stays)
		}
	}
}

func TestPlanReserve(t *testing.T) {
	cases := []struct {
		name string
		f    reserveFacts
		want bool
	}{
		{"a Kubernetes cluster in service: picked ahead", reserveFacts{}, true},
		{"a pooled cluster: the pool is decided when the slot is free", reserveFacts{pooled: true}, false},
		{"a backend that starts processes in the cycle", reserveFacts{starts: true}, false},
		{"a CPU queue hands its slot on at submission anyway", reserveFacts{cpu: true}, false},
		{"a cluster in maintenance receives nothing new", reserveFacts{outOfService: "it is in maintenance"}, false},
		{"a cluster backing off would refuse the create", reserveFacts{backoff: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := planReserve(tc.f); got != tc.want {
				t.Errorf("planReserve(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		})
	}
}

// A job's progress while its pods start is written only once they have
// had progressGrace to run.
func TestPlanProgress(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		since, now time.Time
		want       time.Time
	}{
		{"start unknown: at once", time.Time{}, t0, time.Time{}},
		{"just submitted: when the grace ends", t0, t0.Add(200 * time.Millisecond), t0.Add(progressGrace)},
		{"grace over: at once", t0, t0.Add(progressGrace), time.Time{}},
		{"long past: at once", t0, t0.Add(time.Hour), time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planProgress(tc.since, tc.now); !got.Equal(tc.want) {
				t.Errorf("planProgress(%v, %v) = %v, want %v", tc.since, tc.now, got, tc.want)
			}
		})
	}
}
