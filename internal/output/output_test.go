package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-d)) }

func printTo(t *testing.T, f Format, print func(p *Printer) error) (string, string) {
	t.Helper()
	var out, notes bytes.Buffer
	p := New(&out, &notes, f, func() time.Time { return now })
	if err := print(p); err != nil {
		t.Fatal(err)
	}
	return out.String(), notes.String()
}

func TestParseFormat(t *testing.T) {
	for _, in := range []string{"json", "JSON", "Json"} {
		if f, err := ParseFormat(in); err != nil || f != JSON {
			t.Errorf("ParseFormat(%q) = %q, %v", in, f, err)
		}
	}
	var ff FormatFlag
	err := ff.Set("xml")
	if err == nil || err.Error() != "must be one of table, wide, json, yaml, md, name" {
		t.Errorf("Set(xml) = %v, want the allowed values", err)
	}
	if err := ff.Set("yaml"); err != nil || ff.Value != YAML {
		t.Errorf("Set(yaml) = %v, value %q", err, ff.Value)
	}
}

func TestJSONIsTheWireForm(t *testing.T) {
	resp := &falconv1.ListExpsResponse{
		Items:         []*falconv1.Experiment{{Id: "exp-1", ExpType: "benchmark", Status: "Succeeded", Version: 3}},
		NextPageToken: "next",
	}
	out, _ := printTo(t, JSON, func(p *Printer) error { return p.Print(resp, nil) })
	for _, want := range []string{`"exp_type": "benchmark"`, `"next_page_token": "next"`, `"status": "Succeeded"`, `"reason": ""`, `"jobs": []`, `"artifact": null`} {
		if !strings.Contains(out, want) {
			t.Errorf("JSON lacks %s:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "}\n") || !strings.HasPrefix(out, "{\n  \"items\": [") {
		t.Errorf("JSON not indented with a trailing newline:\n%s", out)
	}
	// Byte-stable across runs, unlike protojson's own formatting.
	again, _ := printTo(t, JSON, func(p *Printer) error { return p.Print(resp, nil) })
	if again != out {
		t.Error("JSON output differs between two runs")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
}

func TestYAML(t *testing.T) {
	out, _ := printTo(t, YAML, func(p *Printer) error {
		return p.Print(&falconv1.Experiment{Id: "exp-1", ExpType: "training", Tags: []string{"a"}}, nil)
	})
	for _, want := range []string{"exp_type: training\n", "id: exp-1\n", "tags:\n- a\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("YAML lacks %q:\n%s", want, out)
		}
	}
}

func TestPrintItem(t *testing.T) {
	line := &falconv1.LogLine{JobId: "job-1", Role: "worker", Rank: 1, Line: "hi"}
	out, _ := printTo(t, JSON, func(p *Printer) error {
		if err := p.PrintItem(line, nil); err != nil {
			return err
		}
		return p.PrintItem(line, nil)
	})
	want := `{"job_id":"job-1","role":"worker","rank":1,"pod":"","line":"hi","time":null,"resume":""}` + "\n"
	if diff := cmp.Diff(want+want, out); diff != "" {
		t.Errorf("NDJSON (-want +got):\n%s", diff)
	}
	out, _ = printTo(t, Table, func(p *Printer) error { return p.PrintItem(line, Text("[%s] %s", line.Role, line.Line)) })
	if out != "[worker] hi\n" {
		t.Errorf("text = %q", out)
	}
}

func TestExperimentList(t *testing.T) {
	resp := &falconv1.ListExpsResponse{
		Items: []*falconv1.Experiment{
			{Id: "exp-q7odgo8q9x", Name: "bench", ExpType: "benchmark", ClusterName: "v7x", Status: "Pending", Reason: "Waiting", Creator: "alice", CreatedAt: ago(90 * time.Second)},
			{Id: "exp-2222222222", Name: "train-a-very-long-name", ExpType: "training", ClusterName: "local", Status: "Succeeded", Creator: "bob", CreatedAt: ago(50 * time.Hour)},
		},
		NextPageToken: "abc",
	}
	out, notes := printTo(t, Table, func(p *Printer) error { return p.Print(resp, ExperimentList(resp)) })
	want := `ID              NAME                    TYPE       CLUSTER  STATUS     REASON   AGE  CREATOR
exp-q7odgo8q9x  bench                   benchmark  v7x      Pending    Waiting  90s  alice
exp-2222222222  train-a-very-long-name  training   local    Succeeded  -        2d   bob
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if !strings.Contains(notes, "--page-token abc") {
		t.Errorf("notes = %q, want the next page hint", notes)
	}

	empty := &falconv1.ListExpsResponse{}
	out, notes = printTo(t, Table, func(p *Printer) error { return p.Print(empty, ExperimentList(empty)) })
	if out != "" || notes != "No experiments found.\n" {
		t.Errorf("empty list: out %q notes %q", out, notes)
	}
}

func TestExperimentDetail(t *testing.T) {
	exp := &falconv1.Experiment{
		Id: "exp-q7odgo8q9x", Name: "bench", ExpType: "benchmark", ClusterName: "v7x", Status: "Failed",
		Reason: "RoleFailed", Message: "role worker failed:\nexit 3", Creator: "alice", Tags: []string{"a", "b"},
		CreatedAt: ago(3 * time.Hour),
		RoleToTaskSpec: map[string]*falconv1.TaskSpec{
			"worker": {Replica: 2, DeviceType: "v7x", DeviceCount: 8, DeviceTopo: "2x2x2", Image: "img"},
		},
		Jobs: []*falconv1.Job{
			{Id: "job-ki5t2jegpi", Role: "worker", Status: "Failed", Reason: "JobFailed", Message: "exit code 3", Replica: 2},
		},
		Artifact: &falconv1.Artifact{Id: "art-1t44htxy4y", Status: "Succeeded", Path: "gs://b/experiments/exp/artifacts/art"},
	}
	out, _ := printTo(t, Table, func(p *Printer) error { return p.Print(exp, ExperimentDetail(exp)) })
	want := `ID:        exp-q7odgo8q9x
Name:      bench
Type:      benchmark
Cluster:   v7x
Status:    Failed
Reason:    RoleFailed
Message:   role worker failed: exit 3
Creator:   alice
Priority:  0
Tags:      a, b
Created:   2026-11-29T09:00:00Z (3h ago)
Artifact:  art-1t44htxy4y Succeeded gs://b/experiments/exp/artifacts/art

Roles:
ROLE    REPLICA  DEVICE  COUNT  TOPO   IMAGE
worker  2        v7x     8      2x2x2  img

Jobs:
ID              ROLE    STATUS  REASON     MESSAGE      REPLICA
job-ki5t2jegpi  worker  Failed  JobFailed  exit code 3  2
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("detail (-want +got):\n%s", diff)
	}
}

func TestResourcesLine(t *testing.T) {
	tests := []struct {
		name string
		in   *falconv1.Resources
		want string
	}{
		{"none", nil, ""},
		{"empty", &falconv1.Resources{}, ""},
		{"both, names sorted", &falconv1.Resources{
			Requests: map[string]string{"memory": "4Gi", "cpu": "2"},
			Limits:   map[string]string{"memory": "8Gi"},
		}, "requests cpu=2 memory=4Gi; limits memory=8Gi"},
		{"limits only", &falconv1.Resources{Limits: map[string]string{"cpu": "500m"}}, "limits cpu=500m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resourcesLine(tt.in); got != tt.want {
				t.Errorf("resourcesLine = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestShortDuration(t *testing.T) {
	tests := map[time.Duration]string{
		0:                 "0s",
		119 * time.Second: "119s",
		2 * time.Minute:   "2m",
		119 * time.Minute: "119m",
		2 * time.Hour:     "2h",
		47 * time.Hour:    "47h",
		72 * time.Hour:    "3d",
	}
	for d, want := range tests {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestCell(t *testing.T) {
	if got := Cell(""); got != "-" {
		t.Errorf("Cell(\"\") = %q", got)
	}
	if got := Cell("a\n  b"); got != "a b" {
		t.Errorf("Cell multi-line = %q", got)
	}
	if got := []rune(Cell(strings.Repeat("x", 200))); len(got) != maxCell || got[maxCell-1] != '…' {
		t.Errorf("Cell long = %q", string(got))
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b, []string{"KEY", "A"}, [][]string{{"role.main.command", "a | b\nc"}}); err != nil {
		t.Fatal(err)
	}
	want := "| KEY | A |\n| --- | --- |\n| role.main.command | a \\| b<br>c |\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestArtifactLineCountsFiles(t *testing.T) {
	for _, tc := range []struct {
		files, bytes int64
		complete     bool
		want         string
	}{
		{1, 3, true, "(1 file, 3 B kept)"},
		{2, 2048, true, "(2 files, 2.0 KiB kept)"},
		{0, 0, false, "(0 files, 0 B kept so far)"},
	} {
		a := &falconv1.Artifact{Id: "art-1", Status: "Failed", FileCount: tc.files, ByteCount: tc.bytes, IndexComplete: tc.complete, IndexedAt: timestamppb.Now()}
		if got := artifactLine(a); !strings.HasSuffix(got, tc.want) {
			t.Errorf("artifactLine = %q; want it to end %q", got, tc.want)
		}
	}
}
