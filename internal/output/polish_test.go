package output

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
)

func TestJQ(t *testing.T) {
	resp := &falconv1.ListExpsResponse{Items: []*falconv1.Experiment{
		{Id: "exp-1", Name: "a", Status: "Failed", Priority: 2147483647},
		{Id: "exp-2", Name: "b", Status: "Running"},
	}}
	tests := []struct {
		name, expr, want string
	}{
		{"strings print bare", ".items[].id", "exp-1\nexp-2\n"},
		{"objects print as one line", `.items[0] | {id, status}`, `{"id":"exp-1","status":"Failed"}` + "\n"},
		{"numbers stay exact", ".items[0].priority", "2147483647\n"},
		{"select", `.items[] | select(.status | ascii_downcase == "failed") | .name`, "a\n"},
		{"no results print nothing", `.items[] | select(.status == "Aborted")`, ""},
		{"halt ends quietly", `.items[0].id, halt, .items[1].id`, "exp-1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := ParseQuery(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := printTo(t, JSON, func(p *Printer) error { p.JQ = q; return p.Print(resp, nil) })
			if diff := cmp.Diff(tt.want, out); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestJQErrors(t *testing.T) {
	_, err := ParseQuery(".items[")
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.HasPrefix(err.Error(), `--jq: ".items[": `) {
		t.Errorf("syntax error = %v, want an invalid-input error naming --jq and the expression", err)
	}
	_, err = ParseQuery("nosuchfunc(1)")
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "nosuchfunc") {
		t.Errorf("unknown function = %v", err)
	}
	q, err := ParseQuery(".id | .x")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err = q.Apply(&out, []byte(`{"id":"exp-1"}`))
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "--jq") {
		t.Errorf("runtime error = %v, want it against --jq", err)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name    string
		msg     proto.Message
		want    []string
		wantErr bool
	}{
		{"a list prints each ID", &falconv1.ListExpsResponse{Items: []*falconv1.Experiment{{Id: "exp-1"}, {Id: "exp-2"}}}, []string{"exp-1", "exp-2"}, false},
		{"an empty list prints nothing", &falconv1.ListJobsResponse{}, []string{}, false},
		{"one experiment", &falconv1.Experiment{Id: "exp-1", Name: "run"}, []string{"exp-1"}, false},
		{"clusters go by name", &falconv1.ListClustersResponse{Items: []*falconv1.Cluster{{Id: "cl-1", Name: "local"}}}, []string{"local"}, false},
		{"an abort names its experiment", &falconv1.AbortExpResponse{Experiment: &falconv1.Experiment{Id: "exp-1"}}, []string{"exp-1"}, false},
		{"a log line names nothing", &falconv1.LogLine{Line: "hi"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Names(tt.msg)
			if tt.wantErr {
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("err = %v, want invalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	s, err := Struct(map[string]any{"items": []any{map[string]any{"name": "prod"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Names(s); err != nil || !cmp.Equal(got, []string{"prod"}) {
		t.Errorf("struct names = %v, %v", got, err)
	}
}

func TestWideShowsWhyItWaits(t *testing.T) {
	resp := &falconv1.ListJobsResponse{Items: []*falconv1.Job{
		{Id: "job-1", ExpId: "exp-1", Role: "w", Status: "Pending", Reason: "Waiting", Message: "queued: position 3 of 5 on v7x/2x2x2", Replica: 2, CreatedAt: ago(time.Minute)},
	}}
	narrow, _ := printTo(t, Table, func(p *Printer) error { return p.Print(resp, JobList(resp)) })
	wide, _ := printTo(t, Wide, func(p *Printer) error { return p.Print(resp, JobList(resp)) })
	if strings.Contains(narrow, "position 3") {
		t.Errorf("table shows the message:\n%s", narrow)
	}
	want := `ID     EXP    ROLE  CLUSTER  STATUS   REASON   REPLICA  AGE  NODE POOL  MESSAGE
job-1  exp-1  w     -        Pending  Waiting  2        60s  -          queued: position 3 of 5 on v7x/2x2x2
`
	if diff := cmp.Diff(want, wide); diff != "" {
		t.Errorf("wide (-want +got):\n%s", diff)
	}
	exps := &falconv1.ListExpsResponse{Items: []*falconv1.Experiment{{Id: "exp-1", Status: "Created", Message: "role w: queued", Tags: []string{"a", "b"}}}}
	out, _ := printTo(t, Wide, func(p *Printer) error { return p.Print(exps, ExperimentList(exps)) })
	if !strings.Contains(out, "TAGS  MESSAGE") || !strings.Contains(out, "a,b   role w: queued") {
		t.Errorf("exp list -o wide:\n%s", out)
	}
}

func TestColorKeepsColumnsAligned(t *testing.T) {
	resp := &falconv1.ListExpsResponse{Items: []*falconv1.Experiment{
		{Id: "exp-1", Name: "a", Status: "Failed"},
		{Id: "exp-2", Name: "b", Status: "Succeeded"},
	}}
	out, _ := printTo(t, Table, func(p *Printer) error { p.Color = true; return p.Print(resp, ExperimentList(resp)) })
	if !strings.Contains(out, "\x1b[31mFailed\x1b[0m") || !strings.Contains(out, "\x1b[32mSucceeded\x1b[0m") {
		t.Fatalf("no colours:\n%q", out)
	}
	plain, _ := printTo(t, Table, func(p *Printer) error { return p.Print(resp, ExperimentList(resp)) })
	stripped := strings.NewReplacer("\x1b[31m", "", "\x1b[32m", "", "\x1b[0m", "").Replace(out)
	if diff := cmp.Diff(plain, stripped); diff != "" {
		t.Errorf("coloured table, colours removed, differs from the plain one (-plain +coloured):\n%s", diff)
	}
}

func TestUseColor(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name string
		mode ColorMode
		tty  bool
		env  func(string) string
		want bool
	}{
		{"auto on a terminal", ColorAuto, true, env(), true},
		{"auto in a pipe", ColorAuto, false, env(), false},
		{"unset is auto", "", true, env(), true},
		{"NO_COLOR turns auto off", ColorAuto, true, env("NO_COLOR", "1"), false},
		{"an empty NO_COLOR is not set", ColorAuto, true, env("NO_COLOR", ""), true},
		{"a dumb terminal", ColorAuto, true, env("TERM", "dumb"), false},
		{"always beats NO_COLOR and pipes", ColorAlways, false, env("NO_COLOR", "1"), true},
		{"never on a terminal", ColorNever, true, env(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UseColor(tt.mode, tt.tty, tt.env); got != tt.want {
				t.Errorf("UseColor = %v, want %v", got, tt.want)
			}
		})
	}
	var f ColorFlag
	if err := f.Set("sometimes"); err == nil || err.Error() != "must be one of auto, always, never" {
		t.Errorf("Set(sometimes) = %v", err)
	}
}

func TestVisibleWidth(t *testing.T) {
	for in, want := range map[string]int{"": 0, "abc": 3, "\x1b[31mFailed\x1b[0m": 6, "naïve": 5, "…": 1} {
		if got := visibleWidth(in); got != want {
			t.Errorf("visibleWidth(%q) = %d, want %d", in, got, want)
		}
	}
}
