package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

func testAnalyses(t *testing.T, e env) {
	ctx := context.Background()
	a1 := &store.Analysis{ID: "ana-one", Kind: "accuracy", ExpIDs: []string{"exp-a", "exp-b"}, Params: map[string]string{"rtol": "1e-3"}, Creator: "alice@example.com"}
	a2 := &store.Analysis{ID: "ana-two", Kind: "profile", ExpIDs: []string{"exp-b"}}
	for _, a := range []*store.Analysis{a1, a2} {
		if err := e.s.CreateAnalysis(ctx, a); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Second)
	}
	if err := e.s.CreateAnalysis(ctx, &store.Analysis{ID: "ana-one", Kind: "x"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate id: %v", err)
	}
	got, err := e.s.GetAnalysis(ctx, "ana-one")
	if err != nil || got.Status != lifecycle.Pending || got.Params["rtol"] != "1e-3" || len(got.ExpIDs) != 2 {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if _, err := e.s.GetAnalysis(ctx, "ana-none"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	list, err := e.s.ListAnalyses(ctx, "exp-b")
	if err != nil || len(list) != 2 || list[0].ID != "ana-two" {
		t.Fatalf("list exp-b: %v, %v; want both, newest first", list, err)
	}
	if list, _ := e.s.ListAnalyses(ctx, "exp-a"); len(list) != 1 {
		t.Errorf("list exp-a: %d", len(list))
	}

	// Claims go oldest first, each once.
	c1, err := e.s.ClaimAnalysis(ctx, "w1", e.clk.Now().Add(-10*time.Minute))
	if err != nil || c1 == nil || c1.ID != "ana-one" || c1.Status != lifecycle.Running || c1.Worker != "w1" {
		t.Fatalf("first claim: %+v, %v", c1, err)
	}
	c2, _ := e.s.ClaimAnalysis(ctx, "w2", e.clk.Now().Add(-10*time.Minute))
	if c2 == nil || c2.ID != "ana-two" {
		t.Fatalf("second claim: %+v", c2)
	}
	if c3, err := e.s.ClaimAnalysis(ctx, "w3", e.clk.Now().Add(-10*time.Minute)); err != nil || c3 != nil {
		t.Fatalf("nothing left to claim: %+v, %v", c3, err)
	}
	// A worker that stopped: its analysis is claimed again once stale.
	e.clk.Advance(11 * time.Minute)
	again, err := e.s.ClaimAnalysis(ctx, "w4", e.clk.Now().Add(-10*time.Minute))
	if err != nil || again == nil || again.ID != "ana-one" || again.Worker != "w4" || !again.StartedAt.Equal(*c1.StartedAt) {
		t.Fatalf("stale claim: %+v, %v", again, err)
	}

	// The worker whose claim went stale may not finish it.
	if _, err := e.s.FinishAnalysis(ctx, "ana-one", "w1", lifecycle.Failed, "late", "", ""); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("finish by the stale worker: %v", err)
	}
	done, err := e.s.FinishAnalysis(ctx, "ana-one", "w4", lifecycle.Succeeded, "", `{"allclose": 3}`, "file:///x/reports/ana-one/report.json")
	if err != nil || done.Status != lifecycle.Succeeded || done.FinishedAt == nil || done.Summary != `{"allclose": 3}` {
		t.Fatalf("finish: %+v, %v", done, err)
	}
	if _, err := e.s.FinishAnalysis(ctx, "ana-one", "", lifecycle.Failed, "late", "", ""); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("finishing twice: %v", err)
	}
	if _, err := e.s.FinishAnalysis(ctx, "ana-two", "", lifecycle.Running, "", "", ""); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("finish as Running: %v", err)
	}
	big := make([]byte, store.MaxAnalysisSummary+1)
	if _, err := e.s.FinishAnalysis(ctx, "ana-two", "", lifecycle.Succeeded, "", string(big), ""); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("summary over the limit: %v", err)
	}
	if got, _ := e.s.GetAnalysis(ctx, "ana-two"); got.Status != lifecycle.Running {
		t.Errorf("a refused finish changed the analysis: %s", got.Status)
	}
}
