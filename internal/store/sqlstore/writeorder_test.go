package sqlstore_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// SQLite's transactions take the one writer connection in the order they
// asked for it, and one whose context ends while it waits gives up with
// that error and writes nothing.
func TestSQLiteTransactionsTakeTurns(t *testing.T) {
	ctx := context.Background()
	s := dbtest.NewSQLite(t)
	if err := s.Exec(ctx, "CREATE TABLE turns (k INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	// The first holds the writer until the others queue behind it.
	release := holdWriter(t, s)
	// One that gives up while it waits.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		gaveUp <- s.InTx(cctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(cctx, "INSERT INTO turns (k) VALUES (-1)")
			return err
		})
	}()
	waitTurns(t, s, 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a transaction whose context ended while it waited returned %v, want context.Canceled", err)
	}
	waitTurns(t, s, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var order []int
	const n = 8
	for i := range n {
		wg.Go(func() {
			err := s.InTx(ctx, func(tx *sql.Tx) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				_, err := tx.ExecContext(ctx, "INSERT INTO turns (k) VALUES (?)", i)
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
		waitTurns(t, s, i+1)
	}
	release()
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
		t.Errorf("transactions ran in the order %v, want the order they asked in %v", order, want)
	}
	var rows int
	if err := s.InTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM turns WHERE k < 0").Scan(&rows)
	}); err != nil || rows != 0 {
		t.Errorf("the transaction that gave up wrote %d rows (%v), want none", rows, err)
	}
}

// WithTxObserver times a transaction's wait for SQLite's writer apart from
// its run: one queued behind a writer busy with a thousand inserts reports
// that work as its wait, and the busy one reports it as its run.
func TestTxObserverTimesTheWaitForTheWriter(t *testing.T) {
	ctx := context.Background()
	type obs struct{ wait, run time.Duration }
	var mu sync.Mutex
	var seen []obs
	s := dbtest.NewSQLite(t, sqlstore.WithTxObserver(func(_ string, wait, run time.Duration) {
		mu.Lock()
		seen = append(seen, obs{wait, run})
		mu.Unlock()
	}))
	if err := s.Exec(ctx, "CREATE TABLE timed (k INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	queued := make(chan struct{})
	held := make(chan struct{})
	var heldFrom, queuedAt, doneAt time.Time
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			heldFrom = time.Now()
			close(held)
			<-queued
			for k := range 1000 {
				if _, err := tx.ExecContext(ctx, "INSERT INTO timed (k) VALUES (?)", k); err != nil {
					return err
				}
			}
			doneAt = time.Now()
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
	<-held
	wg.Go(func() {
		if err := s.InTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO timed (k) VALUES (-1)")
			return err
		}); err != nil {
			t.Error(err)
		}
	})
	waitTurns(t, s, 1)
	queuedAt = time.Now()
	close(queued)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("observed %d transactions, want 2: %v", len(seen), seen)
	}
	holder, waiter := seen[0], seen[1]
	if holder.wait >= holder.run {
		t.Errorf("the holder waited %v (ran %v); want nothing but a free writer's begin", holder.wait, holder.run)
	}
	if holder.run < doneAt.Sub(heldFrom) {
		t.Errorf("the holder ran %v by its figure; it held the writer at least %v", holder.run, doneAt.Sub(heldFrom))
	}
	if waiter.wait < doneAt.Sub(queuedAt) {
		t.Errorf("the waiter waited %v by its figure; it was queued at least %v", waiter.wait, doneAt.Sub(queuedAt))
	}
	if waiter.run <= 0 || waiter.run >= waiter.wait {
		t.Errorf("the waiter ran %v (waited %v); want its one insert, shorter than the thousand it waited for", waiter.run, waiter.wait)
	}
}

// queueTurns holds SQLite's writer, queues one transaction per entry of
// lanes in that order ('j' a job status write, 'o' any other), each
// recording its name when it runs, then lets the writer go. It returns
// the names in the order the transactions ran.
func queueTurns(t *testing.T, s *sqlstore.Store, lanes string) string {
	t.Helper()
	ctx := context.Background()
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ran []string
	counts := map[rune]int{}
	for i, l := range lanes {
		counts[l]++
		name := fmt.Sprintf("%c%d", l, counts[l])
		in := s.InTx
		if l == 'j' {
			in = s.InJobTx
		}
		wg.Go(func() {
			if err := in(ctx, func(tx *sql.Tx) error {
				mu.Lock()
				ran = append(ran, name)
				mu.Unlock()
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
		waitTurns(t, s, i+1)
	}
	release()
	wg.Wait()
	return strings.Join(ran, " ")
}

// Job status writes take SQLite's writer ahead of the others, each lane in
// the order it asked; a stream of job writes lets another write through
// after MaxJobStreak of them.
func TestSQLiteJobWritesGoFirst(t *testing.T) {
	streak := strings.Repeat("j", sqlstore.MaxJobStreak+2)
	var streakWant []string
	for i := 1; i <= sqlstore.MaxJobStreak; i++ {
		streakWant = append(streakWant, fmt.Sprintf("j%d", i))
	}
	streakWant = append(streakWant, "o1", fmt.Sprintf("j%d", sqlstore.MaxJobStreak+1), fmt.Sprintf("j%d", sqlstore.MaxJobStreak+2), "o2")
	tests := []struct {
		name, lanes, want string
		oneLane           bool
	}{
		{"job writes pass the others", "ooj", "j1 o1 o2", false},
		{"each lane first come, first served", "ojojo", "j1 j2 o1 o2 o3", false},
		{"others alone keep their order", "ooo", "o1 o2 o3", false},
		{"a stream of job writes lets others through", "o" + streak + "o", strings.Join(streakWant, " "), false},
		{"one lane: arrival order", "ojojo", "o1 j1 o2 j2 o3", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := dbtest.NewSQLite(t)
			if tc.oneLane {
				s.OneLane()
			}
			if got := queueTurns(t, s, tc.lanes); got != tc.want {
				t.Errorf("queued %q: ran %q, want %q", tc.lanes, got, tc.want)
			}
		})
	}
}

// A job write that gives up while it waits leaves the queue behind it
// moving.
func TestSQLiteJobWriteGivesUpInTurn(t *testing.T) {
	ctx := context.Background()
	s := dbtest.NewSQLite(t)
	release := holdWriter(t, s)
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- s.InJobTx(cctx, func(tx *sql.Tx) error { return errors.New("ran after giving up") }) }()
	waitTurns(t, s, 1)
	ran := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.InTx(ctx, func(tx *sql.Tx) error { close(ran); return nil }); err != nil {
			t.Error(err)
		}
	})
	waitTurns(t, s, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a job write whose context ended while it waited returned %v, want context.Canceled", err)
	}
	release()
	<-ran
	wg.Wait()
	if n := s.TurnWaiting(); n != 0 {
		t.Errorf("%d transactions still waiting", n)
	}
}

// The store's job status writes, one or a batch, go in the job lane; the
// other writes do not.
func TestStoreJobStatusWritesTakeTheJobLane(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var lanes []string
	s := dbtest.NewSQLite(t, sqlstore.WithTxObserver(func(lane string, _, _ time.Duration) {
		mu.Lock()
		lanes = append(lanes, lane)
		mu.Unlock()
	}))
	took := func(what string, want string, do func() error) {
		t.Helper()
		mu.Lock()
		lanes = nil
		mu.Unlock()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lanes) == 0 || slices.ContainsFunc(lanes, func(l string) bool { return l != want }) {
			t.Errorf("%s went in lanes %v, want only %q", what, lanes, want)
		}
	}
	exp, jobs, art := newExp("lanes", "main")
	job := jobs[0]
	took("CreateExp", "other", func() error { return s.CreateExp(ctx, exp, jobs, art) })
	took("UpdateJobStatus", "jobs", func() error {
		_, err := s.UpdateJobStatus(ctx, store.StatusUpdate{ID: job.ID, Expected: lifecycle.Pending, Status: lifecycle.Pending, Reason: "Waiting", Message: "queue position #1"})
		return err
	})
	took("UpdateJobStatuses", "jobs", func() error {
		_, errs, _, err := s.UpdateJobStatuses(ctx, []store.StatusUpdate{{ID: job.ID, Expected: lifecycle.Pending, Status: lifecycle.Running}})
		return cmp.Or(err, errs[0])
	})
	took("UpdateExpStatus", "other", func() error {
		_, err := s.UpdateExpStatus(ctx, store.StatusUpdate{ID: exp.ID, Expected: lifecycle.Running, Status: lifecycle.Running, Message: "running"})
		return err
	})
}

// holdWriter takes SQLite's writer in a transaction that holds it until
// the returned release is called, which waits for that transaction's end.
func holdWriter(t *testing.T, s *sqlstore.Store) (release func()) {
	t.Helper()
	ctx := context.Background()
	held, done := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.InTx(ctx, func(tx *sql.Tx) error { close(held); <-done; return nil }); err != nil {
			t.Error(err)
		}
	})
	<-held
	return func() { close(done); wg.Wait() }
}

// waitTurns waits until n transactions wait for SQLite's writer.
func waitTurns(t *testing.T, s *sqlstore.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); s.TurnWaiting() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions waiting, want %d", s.TurnWaiting(), n)
		}
	}
}
