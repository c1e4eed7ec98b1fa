package compare

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

func exp(id, config string, roles map[string]*falconv1.TaskSpec) *falconv1.Experiment {
	return &falconv1.Experiment{Id: id, ExpType: "training", Config: config, RoleToTaskSpec: roles}
}

func TestSpecs(t *testing.T) {
	roleA := map[string]*falconv1.TaskSpec{"main": {Command: "python train.py", Image: "img:1", Replica: 2, DeviceType: "v7x", DeviceTopo: "2x2x2", Envs: map[string]string{"XLA_FLAGS": "--a"}}}
	roleB := map[string]*falconv1.TaskSpec{"main": {Command: "python train.py", Image: "img:2", Replica: 2, DeviceType: "v7x", DeviceTopo: "2x2x2", Envs: map[string]string{"XLA_FLAGS": "--b", "NEW": "1"}}}
	tests := []struct {
		name  string
		exps  []*falconv1.Experiment
		all   bool
		mode  string
		rows  map[string][]string // key -> values ("<absent>" where missing)
		nrows int                 // -1: don't check
	}{
		{
			name: "YAML and JSON configs compare by key path",
			exps: []*falconv1.Experiment{
				exp("a", "optimizer:\n  lr: 0.001\n  name: adam\nlayers:\n  - {remat: false}\n  - {remat: true}\n", roleA),
				exp("b", `{"optimizer": {"lr": 0.002, "name": "adam"}, "layers": [{"remat": false}, {"remat": false}], "seed": 7}`, roleA),
			},
			mode: "keys",
			rows: map[string][]string{
				"config.optimizer.lr":    {"0.001", "0.002"},
				"config.layers[1].remat": {"true", "false"},
				"config.seed":            {"<absent>", "7"},
			},
			nrows: 3,
		},
		{
			name: "role specs: image, envs",
			exps: []*falconv1.Experiment{exp("a", "", roleA), exp("b", "", roleB)},
			mode: "keys",
			rows: map[string][]string{
				"role.main.image":          {"img:1", "img:2"},
				"role.main.envs.XLA_FLAGS": {"--a", "--b"},
				"role.main.envs.NEW":       {"<absent>", "1"},
			},
			nrows: 3,
		},
		{
			name:  "identical experiments differ in nothing",
			exps:  []*falconv1.Experiment{exp("a", "x: 1\n", roleA), exp("b", "x: 1\n", roleA)},
			mode:  "keys",
			nrows: 0,
		},
		{
			name:  "--all keeps every row",
			exps:  []*falconv1.Experiment{exp("a", "x: 1\n", roleA), exp("b", "x: 1\n", roleA)},
			all:   true,
			mode:  "keys",
			rows:  map[string][]string{"config.x": {"1", "1"}, "role.main.replica": {"2", "2"}},
			nrows: -1,
		},
		{
			name: "a config that is not a mapping compares line by line",
			exps: []*falconv1.Experiment{exp("a", "--lr=0.1\n--steps=10\n", roleA), exp("b", "--lr=0.2\n--steps=10\n--fast\n", roleA)},
			mode: "lines",
			rows: map[string][]string{
				"config[line 1]": {"--lr=0.1", "--lr=0.2"},
				"config[line 3]": {"<absent>", "--fast"},
			},
			nrows: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Specs(tt.exps, tt.all)
			if d.ConfigMode != tt.mode {
				t.Errorf("config mode %q, want %q", d.ConfigMode, tt.mode)
			}
			got := map[string][]string{}
			for _, r := range d.Rows {
				vs := make([]string, len(r.Values))
				for i := range r.Values {
					vs[i] = r.Values[i]
					if !r.Present[i] {
						vs[i] = "<absent>"
					}
				}
				got[r.Key] = vs
			}
			for k, want := range tt.rows {
				if diff := cmp.Diff(want, got[k]); diff != "" {
					t.Errorf("row %s (-want +got):\n%s", k, diff)
				}
			}
			if tt.nrows >= 0 && len(d.Rows) != tt.nrows {
				t.Errorf("%d rows, want %d: %v", len(d.Rows), tt.nrows, got)
			}
		})
	}
}

func TestKeyOrder(t *testing.T) {
	d := Specs([]*falconv1.Experiment{
		exp("a", "layers: [1,2,3,4,5,6,7,8,9,10,11]\n", nil),
		exp("b", "layers: [2,3,4,5,6,7,8,9,10,11,12]\n", nil),
	}, false)
	var keys []string
	for _, r := range d.Rows {
		keys = append(keys, r.Key)
	}
	if keys[1] != "config.layers[1]" || keys[9] != "config.layers[9]" || keys[10] != "config.layers[10]" {
		t.Errorf("keys out of numeric order: %v", keys)
	}
}

func TestCheckIDs(t *testing.T) {
	for _, tt := range []struct {
		ids  []string
		want string
	}{
		{[]string{"a"}, "at least two"},
		{[]string{"a", "a"}, "given twice"},
		{[]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}, "at most 10"},
		{[]string{"a", "b"}, ""},
	} {
		err := CheckIDs(tt.ids)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckIDs(%v) = %v, want %q", tt.ids, err, tt.want)
		}
	}
}

func TestMannWhitneyP(t *testing.T) {
	// U = 0: normal approximation with continuity correction.
	p := MannWhitneyP([]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10})
	if math.Abs(p-0.01219) > 0.0005 {
		t.Errorf("separated samples: p = %v, want 0.0122", p)
	}
	if p := MannWhitneyP([]float64{3, 3, 3}, []float64{3, 3, 3}); p != 1 {
		t.Errorf("all tied: p = %v, want 1", p)
	}
	if p := MannWhitneyP([]float64{1, 3, 5, 7, 9}, []float64{2, 4, 6, 8, 10}); p < 0.5 {
		t.Errorf("interleaved samples: p = %v, want large", p)
	}
}

// noisy is n steps around mean with relative noise, after 5 warm-up
// steps three times slower.
func noisy(r *rand.Rand, n int, mean, noise float64) []float64 {
	v := make([]float64, 0, n+5)
	for range 5 {
		v = append(v, 3*mean)
	}
	for range n {
		v = append(v, mean*(1+noise*(2*r.Float64()-1)))
	}
	return v
}

func TestMetricsVerdicts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := func(name, better string, v []float64) map[string]Series {
		return map[string]Series{name: {Name: name, Better: better, Values: v}}
	}
	o := DefaultOptions
	o.SkipSteps = 5
	tests := []struct {
		name    string
		base    map[string]Series
		cand    map[string]Series
		verdict string
	}{
		{"a steady 5% slowdown is a regression", s("step_time", "", noisy(r, 200, 1.0, 0.01)), s("step_time", "", noisy(r, 200, 1.05, 0.01)), Regression},
		{"a 1% wobble on noisy steps is noise", s("step_time", "", noisy(r, 200, 1.0, 0.2)), s("step_time", "", noisy(r, 200, 1.01, 0.2)), WithinNoise},
		{"5% more throughput is an improvement", s("tokens_per_sec", "", noisy(r, 200, 1000, 0.01)), s("tokens_per_sec", "", noisy(r, 200, 1050, 0.01)), Improvement},
		{"the manifest's direction wins over the name", s("score", "lower", noisy(r, 200, 10, 0.01)), s("score", "", noisy(r, 200, 9, 0.01)), Improvement},
		{"a change with no direction says so", s("widgets", "", noisy(r, 200, 10, 0.01)), s("widgets", "", noisy(r, 200, 12, 0.01)), NoDirection},
		{"a few steps get no verdict", s("loss", "", noisy(r, 3, 1, 0.01)), s("loss", "", noisy(r, 3, 2, 0.01)), TooFewSteps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Metrics([]string{"a", "b"}, []map[string]Series{tt.base, tt.cand}, nil, o)
			if err != nil {
				t.Fatal(err)
			}
			v := res.Metrics[0].Values[1]
			if v.Verdict != tt.verdict {
				t.Errorf("verdict %q (%s; rel %+.3f, p %v), want %q", v.Verdict, v.Why, v.Relative, v.P, tt.verdict)
			}
			if res.Regressed != (tt.verdict == Regression) {
				t.Errorf("Regressed = %v", res.Regressed)
			}
			if res.Metrics[0].Values[0].Skipped != 5 {
				t.Errorf("warm-up skipped %d steps, want 5", res.Metrics[0].Values[0].Skipped)
			}
		})
	}
}

func TestMetricsErrors(t *testing.T) {
	a := map[string]Series{"loss": {Values: []float64{1}}}
	b := map[string]Series{"step_time": {Values: []float64{1}}}
	_, err := Metrics([]string{"exp-a", "exp-b"}, []map[string]Series{a, b}, nil, DefaultOptions)
	if err == nil || !strings.Contains(err.Error(), "no metric in common: exp-a has loss; exp-b has step_time") {
		t.Errorf("no common metric: %v", err)
	}
	_, err = Metrics([]string{"exp-a", "exp-b"}, []map[string]Series{a, b}, []string{"loss"}, DefaultOptions)
	if err == nil || !strings.Contains(err.Error(), "--metric loss: experiment exp-b reports no such metric; it has: step_time") {
		t.Errorf("--metric missing: %v", err)
	}
}

func TestKnownDirection(t *testing.T) {
	for name, want := range map[string]string{
		"step_time": "lower", "latency_ms": "lower", "loss": "lower", "peak_memory_bytes": "lower",
		"tokens_per_sec": "higher", "mfu": "higher", "TFLOPS": "higher", "accuracy": "higher", "widgets": "",
	} {
		if got := KnownDirection(name); got != want {
			t.Errorf("KnownDirection(%q) = %q, want %q", name, got, want)
		}
	}
}

// BenchmarkMetrics100k: one metric of 10^5 steps in each of two
// experiments, the size for exp compare (the rank test sorts both
// samples together: O(n log n)).
func BenchmarkMetrics100k(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	base := map[string]Series{"step_time": {Name: "step_time", Values: noisy(r, 100_000, 1.0, 0.05)}}
	cand := map[string]Series{"step_time": {Name: "step_time", Values: noisy(r, 100_000, 1.01, 0.05)}}
	for b.Loop() {
		if _, err := Metrics([]string{"a", "b"}, []map[string]Series{base, cand}, nil, DefaultOptions); err != nil {
			b.Fatal(err)
		}
	}
}

func TestZeroBaselineAndNaN(t *testing.T) {
	zeros := make([]float64, 20)
	fifties := make([]float64, 20)
	for i := range fifties {
		fifties[i] = 50
	}
	o := DefaultOptions
	o.SkipSteps = 0
	res, err := Metrics([]string{"a", "b"}, []map[string]Series{
		{"oom_time": {Values: zeros}}, {"oom_time": {Values: fifties}},
	}, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Metrics[0].Values[1]; v.Verdict != Regression {
		t.Errorf("0 to 50 of a lower-is-better metric: %+v, want a regression", v)
	}
	if p := MannWhitneyP([]float64{1, math.NaN(), 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}); math.IsNaN(p) || p > 0.05 {
		t.Errorf("with a NaN sample: p = %v", p)
	}
}
