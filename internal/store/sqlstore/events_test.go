package sqlstore_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// listAll reads every event of the experiment after seq, page by page.
func listAll(t *testing.T, s store.Store, expID string, after int64) []store.Event {
	t.Helper()
	var out []store.Event
	for {
		page, err := s.ListEvents(ctx, store.EventFilter{ExpID: expID, AfterSeq: after})
		if err != nil {
			t.Fatalf("ListEvents(%s, after %d): %v", expID, after, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// brief is what a test compares of an event: everything but its time.
type brief struct {
	Seq              int64
	Kind, ID, Status string
	Reason, Message  string
	Detail           map[string]string
}

func briefs(evs []store.Event) []brief {
	out := make([]brief, len(evs))
	for i, e := range evs {
		out[i] = brief{e.Seq, e.Kind, e.EntityID, string(e.Status), e.Reason, e.Message, e.Detail}
	}
	return out
}

// testEventsRecordEveryChange: every write that changes what a watcher sees
// of an experiment or a job (status, reason, message, node pool) records one
// event, numbered 1, 2, 3...; a write that repeats the row records none.
func testEventsRecordEveryChange(t *testing.T, e env) {
	exp, jobs, art := newExp("events", "trainer", "evaluator")
	mustCreate(t, e.s, exp, jobs, art)
	tr, ev := jobs[0].ID, jobs[1].ID
	role := func(r string) map[string]string { return map[string]string{"role": r} }
	want := []brief{
		{1, "experiment", exp.ID, "Created", "", "", nil},
		{2, "job", tr, "Pending", "", "", map[string]string{"role": "trainer", "cluster": "local"}},
		{3, "job", ev, "Pending", "", "", map[string]string{"role": "evaluator", "cluster": "local"}},
	}

	mustJob := func(u store.StatusUpdate) {
		t.Helper()
		if _, err := e.s.UpdateJobStatus(ctx, u); err != nil {
			t.Fatalf("UpdateJobStatus(%+v): %v", u, err)
		}
	}
	queued := store.StatusUpdate{ID: tr, Expected: lifecycle.Pending, Status: lifecycle.Pending, Reason: "Queued", Message: "position 2 of 2"}
	mustJob(queued)
	mustJob(queued) // the same again: nothing new to see
	want = append(want, brief{4, "job", tr, "Pending", "Queued", "position 2 of 2", role("trainer")})

	mustJob(store.StatusUpdate{ID: tr, Expected: lifecycle.Pending, Status: lifecycle.Pending, Reason: "Provisioning", Message: "creating node pool", NodePool: "falcon-pool-1", ClusterName: "edge-a"})
	want = append(want, brief{5, "job", tr, "Pending", "Provisioning", "creating node pool",
		map[string]string{"role": "trainer", "node_pool": "falcon-pool-1", "cluster": "edge-a"}})

	// A refused update records nothing; the batch's others do.
	if _, err := e.s.UpdateJobStatus(ctx, store.StatusUpdate{ID: ev, Expected: lifecycle.Running, Status: lifecycle.Succeeded}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("stale update = %v, want ErrFailedPrecondition", err)
	}
	_, errs, _, err := e.s.UpdateJobStatuses(ctx, []store.StatusUpdate{
		{ID: tr, Expected: lifecycle.Pending, Status: lifecycle.Running, NodePool: "falcon-pool-1"},
		{ID: ev, Expected: lifecycle.Running, Status: lifecycle.Succeeded},
		{ID: ev, Expected: lifecycle.Pending, Status: lifecycle.Running},
		{ID: ev, Expected: lifecycle.Running, Status: lifecycle.Running}, // unchanged
	})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], errdefs.ErrFailedPrecondition) || errs[2] != nil || errs[3] != nil {
		t.Fatalf("UpdateJobStatuses = %v, %v", errs, err)
	}
	// The experiment follows its jobs in the same transaction, its event
	// after theirs.
	want = append(want,
		brief{6, "job", tr, "Running", "", "", role("trainer")},
		brief{7, "job", ev, "Running", "", "", role("evaluator")},
		brief{8, "experiment", exp.ID, "Running", "", "evaluator Running, trainer Running", nil})

	if _, err := e.s.UpdateExpStatus(ctx, store.StatusUpdate{ID: exp.ID, Expected: lifecycle.Running, Status: lifecycle.Running,
		Message: "evaluator Running, trainer Running"}); err != nil {
		t.Fatal(err) // the same again: nothing new to see
	}

	if _, err := e.s.AppendJobMessage(ctx, ev, "metrics were late"); err != nil {
		t.Fatal(err)
	}
	want = append(want, brief{9, "job", ev, "Running", "", "metrics were late", role("evaluator")})

	if err := e.s.AppendEvents(ctx, []store.Event{{ExpID: exp.ID, Kind: store.EventExperiment, EntityID: exp.ID,
		Status: lifecycle.Running, Message: "ttl ends in 10m", Detail: map[string]string{"ttl_left": "10m0s"}}}); err != nil {
		t.Fatal(err)
	}
	want = append(want, brief{10, "experiment", exp.ID, "Running", "", "ttl ends in 10m", map[string]string{"ttl_left": "10m0s"}})

	mustJob(store.StatusUpdate{ID: ev, Expected: lifecycle.Running, Status: lifecycle.Succeeded})
	want = append(want, brief{11, "job", ev, "Succeeded", "", "", role("evaluator")})
	at := e.clk.Advance(time.Minute)
	if _, _, err := e.s.AbortExp(ctx, exp.ID, "wrong config"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.s.AbortExp(ctx, exp.ID, "again"); err != nil {
		t.Fatal(err)
	}
	want = append(want,
		brief{12, "experiment", exp.ID, "Aborting", "", "wrong config", nil},
		brief{13, "job", tr, "Aborting", "", "wrong config", role("trainer")})
	if _, _, err := e.s.ForceAbortExp(ctx, exp.ID, "forced", "cluster gone"); err != nil {
		t.Fatal(err)
	}
	want = append(want,
		brief{14, "experiment", exp.ID, "Aborted", "", "forced", nil},
		brief{15, "job", tr, "Aborted", "", "cluster gone", role("trainer")})

	got := listAll(t, e.s, exp.ID, 0)
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(got) > 12 && !got[11].Time.Equal(at) {
		t.Errorf("the abort's event is at %s, want the clock's %s", got[11].Time, at)
	}
	if len(got) > 0 && !got[0].Time.Equal(t0us) {
		t.Errorf("the creation's event is at %s, want %s", got[0].Time, t0us)
	}
	if diff := cmp.Diff(want[9:], briefs(listAll(t, e.s, exp.ID, 9))); diff != "" {
		t.Errorf("events after seq 9 (-want +got):\n%s", diff)
	}
	if page, err := e.s.ListEvents(ctx, store.EventFilter{ExpID: exp.ID, AfterSeq: 2, Limit: 3}); err != nil || len(page) != 3 || page[0].Seq != 3 {
		t.Errorf("ListEvents(after 2, limit 3) = %v, %v", briefs(page), err)
	}

	// Deleting the experiment deletes its events.
	if err := e.s.DeleteExp(ctx, exp.ID); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, e.s, exp.ID, 0); len(got) != 0 {
		t.Errorf("events of a deleted experiment: %v", briefs(got))
	}
}

// testAppendEventsRefuses: events name an experiment that exists, an
// entity and a kind; a refused batch writes nothing.
func testAppendEventsRefuses(t *testing.T, e env) {
	exp, jobs, art := newExp("refuses")
	mustCreate(t, e.s, exp, jobs, art)
	ok := store.Event{ExpID: exp.ID, Kind: store.EventJob, EntityID: jobs[0].ID, Status: lifecycle.Pending, Message: "exec session opened"}
	for _, tt := range []struct {
		name string
		ev   store.Event
		want error
	}{
		{"unknown experiment", store.Event{ExpID: "exp-missing", Kind: store.EventExperiment, EntityID: "exp-missing"}, errdefs.ErrNotFound},
		{"no kind", store.Event{ExpID: exp.ID, EntityID: exp.ID}, errdefs.ErrInvalid},
		{"another kind", store.Event{ExpID: exp.ID, Kind: "artifact", EntityID: exp.ID}, errdefs.ErrInvalid},
		{"no entity", store.Event{ExpID: exp.ID, Kind: store.EventJob}, errdefs.ErrInvalid},
	} {
		if err := e.s.AppendEvents(ctx, []store.Event{ok, tt.ev}); !errors.Is(err, tt.want) {
			t.Errorf("%s: AppendEvents = %v, want %v", tt.name, err, tt.want)
		}
	}
	if got := listAll(t, e.s, exp.ID, 0); len(got) != 1+len(jobs) {
		t.Errorf("refused batches wrote events: %v", briefs(got))
	}
	// A long message is cut, the experiment keeps its own.
	long := ok
	long.Message = string(make([]byte, 3*store.MaxEventMessage))
	if err := e.s.AppendEvents(ctx, []store.Event{long}); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, e.s, exp.ID, int64(len(jobs)+1)); len(got) != 1 || len(got[0].Message) != store.MaxEventMessage {
		t.Errorf("a long message is kept as %d bytes, want %d", len(got[len(got)-1].Message), store.MaxEventMessage)
	}
}

// testEventsBounded: an experiment keeps its newest MaxEventsPerExp events
// and its numbering; another experiment's are untouched.
func testEventsBounded(t *testing.T, e env) {
	busy, bj, ba := newExp("busy", "main")
	calm, cj, ca := newExp("calm", "main")
	mustCreate(t, e.s, busy, bj, ba)
	mustCreate(t, e.s, calm, cj, ca)
	const extra = store.MaxEventsPerExp + 205
	batch := make([]store.Event, 0, 100)
	for i := range extra {
		batch = append(batch, store.Event{ExpID: busy.ID, Kind: store.EventJob, EntityID: bj[0].ID,
			Status: lifecycle.Pending, Reason: "Queued", Message: fmt.Sprintf("position %d", i)})
		if len(batch) == cap(batch) || i == extra-1 {
			if err := e.s.AppendEvents(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// And one status write beyond, which trims as AppendEvents does.
	if _, err := e.s.UpdateJobStatus(ctx, store.StatusUpdate{ID: bj[0].ID, Expected: lifecycle.Pending, Status: lifecycle.Running}); err != nil {
		t.Fatal(err)
	}
	last := int64(2 + extra + 1)
	got := listAll(t, e.s, busy.ID, 0)
	if len(got) != store.MaxEventsPerExp || got[0].Seq != last-store.MaxEventsPerExp+1 || got[len(got)-1].Seq != last {
		t.Fatalf("kept %d events, seq %d..%d; want %d, %d..%d", len(got), got[0].Seq, got[len(got)-1].Seq,
			store.MaxEventsPerExp, last-store.MaxEventsPerExp+1, last)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq+1 {
			t.Fatalf("gap between seq %d and %d", got[i-1].Seq, got[i].Seq)
		}
	}
	if got[len(got)-1].Status != lifecycle.Running {
		t.Errorf("newest event %+v, want the move to Running", got[len(got)-1])
	}
	if c := listAll(t, e.s, calm.ID, 0); len(c) != 2 || c[0].Seq != 1 {
		t.Errorf("the other experiment's events: %v", briefs(c))
	}
}

// testEventsStopAtAGap: an event whose write has not committed while a
// later one has is never stepped over: a page ends before it, and reading
// after the last event seen returns nothing until it is there. A gap left
// by the oldest events dropped is crossed.
func testEventsStopAtAGap(t *testing.T, e env) {
	exp, jobs, art := newExp("gap", "main")
	mustCreate(t, e.s, exp, jobs, art)
	for i := range 3 {
		u := store.StatusUpdate{ID: jobs[0].ID, Expected: lifecycle.Pending, Status: lifecycle.Pending, Reason: "Queued", Message: fmt.Sprintf("round %d", i)}
		if _, err := e.s.UpdateJobStatus(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// Seqs 1 (the creation), 2 (the job's), 3, 4, 5 (the writes). 4 is
	// "still being committed".
	if err := e.s.HideEvent(ctx, exp.ID, 4); err != nil {
		t.Fatal(err)
	}
	seqs := func(after int64) []int64 {
		page, err := e.s.ListEvents(ctx, store.EventFilter{ExpID: exp.ID, AfterSeq: after})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, ev := range page {
			out = append(out, ev.Seq)
		}
		return out
	}
	for _, tc := range []struct {
		after int64
		want  []int64
	}{{0, []int64{1, 2, 3}}, {1, []int64{2, 3}}, {3, nil}, {4, []int64{5}}} {
		if got := seqs(tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("after %d: seqs %v; want %v", tc.after, got, tc.want)
		}
	}
	// The oldest dropped: reading from the start, or after one dropped,
	// begins at the oldest kept.
	for _, seq := range []int64{1, 2} {
		if err := e.s.HideEvent(ctx, exp.ID, seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		after int64
		want  []int64
	}{{0, []int64{3}}, {1, []int64{3}}} {
		if got := seqs(tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("after %d with 1 and 2 dropped: seqs %v; want %v", tc.after, got, tc.want)
		}
	}
}

// testEventsCommitInOrder: writers racing on the jobs of one experiment
// (one at a time, in batches and through aborts) never let a reader see a
// seq before an earlier one has committed. The reader follows as a watcher
// does, after the last seq it saw, and must see every event exactly once,
// with no gap.
func testEventsCommitInOrder(t *testing.T, e env) {
	exp, jobs, art := newExp("race", "a", "b", "c", "d")
	exp.Status = lifecycle.Running
	mustCreate(t, e.s, exp, jobs, art)
	const rounds = 60
	// The creation's, one per job's creation and one per write (each a
	// new Message within Pending, which leaves the experiment as it was).
	want := 1 + len(jobs) + len(jobs)*rounds
	var wg sync.WaitGroup
	for w, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				u := store.StatusUpdate{ID: j.ID, Expected: lifecycle.Pending, Status: lifecycle.Pending, Reason: "Queued", Message: fmt.Sprintf("w%d round %d", w, i)}
				var err error
				if w%2 == 0 {
					_, err = e.s.UpdateJobStatus(ctx, u)
				} else {
					_, errs, _, berr := e.s.UpdateJobStatuses(ctx, []store.StatusUpdate{u})
					err = errors.Join(berr, errs[0])
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	var seen []store.Event
	go func() {
		defer close(done)
		var after int64
		for {
			page, err := e.s.ListEvents(ctx, store.EventFilter{ExpID: exp.ID, AfterSeq: after})
			if err != nil {
				t.Error(err)
				return
			}
			for _, ev := range page {
				if ev.Seq != after+1 {
					t.Errorf("read seq %d after %d: a later event committed before an earlier one", ev.Seq, after)
				}
				after = ev.Seq
			}
			seen = append(seen, page...)
			if int(after) == want {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the reader saw %d events of %d", len(seen), want)
	}
}
