package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

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
	release := make(chan struct{})
	held := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.InTx(ctx, func(tx *sql.Tx) error { close(held); <-release; return nil }); err != nil {
			t.Error(err)
		}
	})
	<-held
	waitTurns := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for s.TurnWaiting() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d transactions waiting, want %d", s.TurnWaiting(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// One that gives up while it waits.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		gaveUp <- s.InTx(cctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(cctx, "INSERT INTO turns (k) VALUES (-1)")
			return err
		})
	}()
	waitTurns(1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a transaction whose context ended while it waited returned %v, want context.Canceled", err)
	}
	waitTurns(0)
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
		waitTurns(i + 1)
	}
	close(release)
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
	s := dbtest.NewSQLite(t, sqlstore.WithTxObserver(func(wait, run time.Duration) {
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
	for deadline := time.Now().Add(30 * time.Second); s.TurnWaiting() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second transaction never queued")
		}
	}
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
