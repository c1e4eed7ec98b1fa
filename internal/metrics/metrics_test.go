package metrics_test

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/falconhq/falcon/internal/metrics"
)

func TestHandler(t *testing.T) {
	reg := metrics.NewRegistry()
	rm := metrics.NewRM(reg)
	rm.Cycles.Inc()
	rm.Finished.WithLabelValues("edge-a", "Failed", "NodePoolTimeout").Inc()
	var ready error = errors.New("the resource manager is starting")
	leading := metrics.NewLeader(reg)
	leading.Set(1)
	role := "leader"
	srv := httptest.NewServer(metrics.Handler(reg, func() (string, error) { return role, ready }))
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		"falcon_rm_cycles_total 1",
		`falcon_jobs_finished_total{cluster="edge-a",reason="NodePoolTimeout",status="Failed"} 1`,
		"falcon_leader 1",
		"go_goroutines", "process_cpu_seconds_total",
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	tests := []struct {
		path  string
		role  string
		ready error
		code  int
		body  string
	}{
		{"/healthz", "leader", errors.New("whatever"), http.StatusOK, "ok"},
		{"/readyz", "leader", errors.New("the resource manager is starting"), http.StatusServiceUnavailable, "not ready: the resource manager is starting"},
		{"/readyz", "leader", nil, http.StatusOK, "ok: leader"},
		{"/readyz", "standby", nil, http.StatusOK, "ok: standby"},
	}
	for _, tc := range tests {
		role, ready = tc.role, tc.ready
		if code, body := get(tc.path); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s with ready=%v: %d %q, want %d %q", tc.path, tc.ready, code, body, tc.code, tc.body)
		}
	}
}

// Each transaction the store reports lands in its lane's and phase's
// series, and every lane's two series exist before the first.
func TestStoreObservesBothPhases(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewStore(reg)
	type series struct {
		n   uint64
		sum float64
	}
	byLanePhase := func() map[string]series {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]series{}
		for _, f := range fams {
			for _, s := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				h := s.GetHistogram()
				out[labels["lane"]+"/"+labels["phase"]] = series{h.GetSampleCount(), h.GetSampleSum()}
			}
		}
		return out
	}
	got := byLanePhase()
	for _, k := range []string{"jobs/wait", "jobs/run", "other/wait", "other/run"} {
		if s, ok := got[k]; !ok || s != (series{}) {
			t.Errorf("before any transaction: %s is %+v (exists: %v); want it at zero", k, s, ok)
		}
	}
	if len(got) != 4 {
		t.Errorf("before any transaction: %v; want four series", got)
	}
	m.ObserveTx("other", 3*time.Millisecond, time.Millisecond)
	m.ObserveTx("other", 0, 5*time.Millisecond)
	m.ObserveTx("jobs", 7*time.Millisecond, 2*time.Millisecond)
	got = byLanePhase()
	if w := got["other/wait"]; w.n != 2 || math.Abs(w.sum-0.003) > 1e-9 {
		t.Errorf("other lane's wait after two transactions: %+v; want 2 summing to 3 ms", w)
	}
	if r := got["other/run"]; r.n != 2 || math.Abs(r.sum-0.006) > 1e-9 {
		t.Errorf("other lane's run after two transactions: %+v; want 2 summing to 6 ms", r)
	}
	if w, r := got["jobs/wait"], got["jobs/run"]; w.n != 1 || math.Abs(w.sum-0.007) > 1e-9 || r.n != 1 || math.Abs(r.sum-0.002) > 1e-9 {
		t.Errorf("jobs lane after one transaction: wait %+v, run %+v; want 7 ms and 2 ms", w, r)
	}
}

// A GaugeSet round keeps every series of the last round until it ends,
// then drops those it did not set again; a series set again is the same
// one, not created anew.
func TestGaugeSet(t *testing.T) {
	vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "t", Help: "t"}, []string{"cluster", "queue"})
	series := func() map[string]float64 {
		t.Helper()
		out := map[string]float64{}
		ch := make(chan prometheus.Metric, 16)
		vec.Collect(ch)
		close(ch)
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			var l []string
			for _, p := range pb.GetLabel() {
				l = append(l, p.GetValue())
			}
			out[strings.Join(l, "/")] = pb.GetGauge().GetValue()
		}
		return out
	}
	g := metrics.NewGaugeSet(vec)
	g.Set(3, "a", "2x2")
	g.Set(1, "b", "2x2")
	g.Flush()
	kept := vec.WithLabelValues("a", "2x2")

	g.Set(2, "a", "2x2")
	if got := series(); len(got) != 2 || got["b/2x2"] != 1 {
		t.Fatalf("in the middle of a round the series are %v, want the last round's still there", got)
	}
	g.Flush()
	if got := series(); len(got) != 1 || got["a/2x2"] != 2 {
		t.Fatalf("after the round the series are %v, want only a/2x2 at 2", got)
	}
	if vec.WithLabelValues("a", "2x2") != kept {
		t.Error("a series set in both rounds was created anew")
	}
	g.Flush()
	if got := series(); len(got) != 0 {
		t.Fatalf("after an empty round the series are %v, want none", got)
	}
}
