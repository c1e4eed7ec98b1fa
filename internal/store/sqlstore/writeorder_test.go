package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

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
