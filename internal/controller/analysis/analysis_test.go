package analysis_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/controller/analysis"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// TestController: queued analyses are each run once, in order, their
// reports written under the first experiment's artifacts and their
// outcomes recorded; a runner's failure fails its analysis with the
// runner's message and leaves the others alone; a kind the controller
// cannot run fails saying so.
func TestController(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	a := env.Create(t, "a", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	b := env.Create(t, "b", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	users := falconv1.NewAnalysisServiceClient(env.UserConn)
	queue := func(kind string, ids ...string) string {
		t.Helper()
		x, err := users.CreateAnalysis(ctx, &falconv1.CreateAnalysisRequest{Kind: kind, ExpIds: ids})
		if err != nil {
			t.Fatal(err)
		}
		return x.GetId()
	}
	ok := queue("profile", a.GetId())
	bad := queue("profile_compare", a.GetId(), b.GetId())
	unknown := queue("accuracy", a.GetId(), b.GetId())

	var ran []string
	c := analysis.New(env.Conn,
		analysis.WithRunner("profile", func(_ context.Context, x *falconv1.Analysis, locs []blobstore.Location, _ *blobstore.Opener) (*analysis.Result, error) {
			ran = append(ran, x.GetId())
			return &analysis.Result{Summary: map[string]int{"steps": 3}, Report: map[string]string{"loc": locs[0].String()}, Markdown: "# profile\n"}, nil
		}),
		analysis.WithRunner("profile_compare", func(_ context.Context, x *falconv1.Analysis, _ []blobstore.Location, _ *blobstore.Opener) (*analysis.Result, error) {
			ran = append(ran, x.GetId())
			return nil, errors.New("no *.xplane.pb under plugins/profile/")
		}),
		analysis.WithRunner("accuracy", nil))
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 2 || ran[0] != ok || ran[1] != bad {
		t.Fatalf("ran %v, want %s then %s", ran, ok, bad)
	}
	get := func(id string) *falconv1.Analysis {
		x, err := users.GetAnalysis(ctx, &falconv1.GetAnalysisRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	done := get(ok)
	if done.GetStatus() != "Succeeded" || done.GetSummary() != `{"steps":3}` || !strings.HasSuffix(done.GetReportPath(), "/reports/"+ok+"/report.json") {
		t.Fatalf("succeeded analysis: %+v", done)
	}
	dir := filepath.Join(strings.TrimPrefix(a.GetArtifactPath(), "file://"), "reports", ok)
	if md, err := os.ReadFile(filepath.Join(dir, "report.md")); err != nil || string(md) != "# profile\n" {
		t.Errorf("report.md: %q, %v", md, err)
	}
	if js, err := os.ReadFile(filepath.Join(dir, "report.json")); err != nil || !strings.Contains(string(js), `"loc": "file:///`) {
		t.Errorf("report.json: %s, %v", js, err)
	}
	if f := get(bad); f.GetStatus() != "Failed" || f.GetMessage() != "no *.xplane.pb under plugins/profile/" {
		t.Errorf("failed analysis: %s %q", f.GetStatus(), f.GetMessage())
	}
	if u := get(unknown); u.GetStatus() != "Failed" || !strings.Contains(u.GetMessage(), "cannot run accuracy analyses") {
		t.Errorf("unknown kind: %s %q", u.GetStatus(), u.GetMessage())
	}
	// Nothing is left: another cycle runs nothing.
	ran = nil
	if err := c.Reconcile(ctx); err != nil || len(ran) != 0 {
		t.Errorf("second cycle: ran %v, %v", ran, err)
	}
}

// TestProfileRunners: the built-in profile and profile_compare runners
// find the newest session's profile under the artifacts, analyse it in
// place and store the figures; a run without a profile fails saying where
// it looked.
func TestProfileRunners(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	a := env.Create(t, "base", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	b := env.Create(t, "cand", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	none := env.Create(t, "none", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	write := func(x *falconv1.Experiment, session string, steps int, lead int64) *xplanetest.Totals {
		t.Helper()
		dir := filepath.Join(strings.TrimPrefix(x.GetArtifactPath(), "file://"), "plugins", "profile", session)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := xplanetest.TPUSteps()
		s.Steps, s.Repeat, s.Variants, s.HostEvents, s.LeadPs = steps, 2, 1, 0, lead
		tot, err := xplanetest.WriteSynthetic(filepath.Join(dir, "host0.xplane.pb"), s)
		if err != nil {
			t.Fatal(err)
		}
		return tot
	}
	write(a, "2026_12_01_10_00_00", 3, 10_000) // older session
	want := write(a, "2026_12_01_11_00_00", 4, 10_000)
	slower := write(b, "2026_12_01_11_30_00", 4, 1_010_000)

	users := falconv1.NewAnalysisServiceClient(env.UserConn)
	queue := func(kind string, ids ...string) string {
		x, err := users.CreateAnalysis(ctx, &falconv1.CreateAnalysisRequest{Kind: kind, ExpIds: ids})
		if err != nil {
			t.Fatal(err)
		}
		return x.GetId()
	}
	p := queue("profile", a.GetId())
	c := queue("profile_compare", a.GetId(), b.GetId())
	missing := queue("profile", none.GetId())
	if err := analysis.New(env.Conn).Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(id string) *falconv1.Analysis {
		x, err := users.GetAnalysis(ctx, &falconv1.GetAnalysisRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	var sum struct {
		Steps struct {
			Count    int     `json:"count"`
			MedianPs float64 `json:"median_ps"`
		} `json:"steps"`
	}
	x := get(p)
	if x.GetStatus() != "Succeeded" || json.Unmarshal([]byte(x.GetSummary()), &sum) != nil || sum.Steps.Count != 4 || sum.Steps.MedianPs != float64(want.StepPs) {
		t.Fatalf("profile: %s %q summary %s; want 4 steps of %d ps", x.GetStatus(), x.GetMessage(), x.GetSummary(), want.StepPs)
	}
	y := get(c)
	var diff struct {
		Median struct {
			A, B float64
		} `json:"step_time_median_ps"`
	}
	if y.GetStatus() != "Succeeded" || json.Unmarshal([]byte(y.GetSummary()), &diff) != nil || diff.Median.A != float64(want.StepPs) || diff.Median.B != float64(slower.StepPs) {
		t.Fatalf("profile_compare: %s %q summary %s", y.GetStatus(), y.GetMessage(), y.GetSummary())
	}
	if z := get(missing); z.GetStatus() != "Failed" || !strings.Contains(z.GetMessage(), "no *.xplane.pb under file:///") || !strings.Contains(z.GetMessage(), "plugins/profile/<session>/") {
		t.Fatalf("no profile: %s %q", z.GetStatus(), z.GetMessage())
	}
}
