package podlogs

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/errdefs"
)

func TestRank(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pod         string
		labels      map[string]string
		annotations map[string]string
		want        int
	}{
		{name: "annotation wins", pod: "job-a-7-xyz", annotations: map[string]string{labelCompletionIndex: "3"}, labels: map[string]string{labelCompletionIndex: "4"}, want: 3},
		{name: "label", pod: "job-a-7-xyz", labels: map[string]string{labelCompletionIndex: "4"}, want: 4},
		{name: "bad annotation falls back to the label", pod: "x", annotations: map[string]string{labelCompletionIndex: "four"}, labels: map[string]string{labelCompletionIndex: "4"}, want: 4},
		{name: "pod name", pod: "job-a-7-xyz12", want: 7},
		{name: "hostname", pod: "job-a-12", want: 12},
		{name: "other job", pod: "job-b-7-xyz", want: -1},
		{name: "not a number", pod: "job-a-x-7", want: -1},
		{name: "leading zero is not an index", pod: "job-a-07-x", want: -1},
		{name: "job name only", pod: "job-a", want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.pod, Labels: tc.labels, Annotations: tc.annotations}}
			if got := podRank(p, "job-a"); got != tc.want {
				t.Errorf("podRank(%s) = %d, want %d", tc.pod, got, tc.want)
			}
		})
	}
}

func TestSplitStamp(t *testing.T) {
	ts := time.Date(2026, 12, 1, 10, 0, 0, 120000000, time.UTC)
	for _, tc := range []struct {
		in       string
		wantTime time.Time
		wantText string
	}{
		{"2026-12-01T10:00:00.12Z hello world", ts, "hello world"},
		{"2026-12-01T10:00:00.12Z ", ts, ""},
		{"2026-12-01T10:00:00.12Z", ts, ""},
		{"no stamp here", time.Time{}, "no stamp here"},
		{"", time.Time{}, ""},
	} {
		gotTime, gotText := splitStamp([]byte(tc.in))
		if !gotTime.Equal(tc.wantTime) || string(gotText) != tc.wantText {
			t.Errorf("splitStamp(%q) = %v, %q; want %v, %q", tc.in, gotTime, gotText, tc.wantTime, tc.wantText)
		}
	}
}

func TestRing(t *testing.T) {
	r := newRing(3)
	var texts func() []string = func() []string {
		var out []string
		for _, l := range r.lines() {
			out = append(out, l.Text)
		}
		return out
	}
	if got := texts(); len(got) != 0 {
		t.Errorf("empty ring = %v", got)
	}
	for _, s := range []string{"a", "b"} {
		r.add(Line{Text: s})
	}
	if diff := cmp.Diff([]string{"a", "b"}, texts()); diff != "" {
		t.Errorf("ring of 2 (-want +got):\n%s", diff)
	}
	for _, s := range []string{"c", "d", "e"} {
		r.add(Line{Text: s})
	}
	if diff := cmp.Diff([]string{"c", "d", "e"}, texts()); diff != "" {
		t.Errorf("ring after 5 (-want +got):\n%s", diff)
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		field string
	}{
		{"grep that does not compile", Options{Grep: "a(b"}, "grep"},
		{"negative tail", Options{Tail: -1}, "tail"},
		{"negative rank", Options{Ranks: []int{0, -2}}, "ranks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.compile()
			var fe errdefs.FieldErrors
			if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != tc.field || !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("compile(%+v) = %v, want one invalid-argument error naming %q", tc.opts, err, tc.field)
			}
		})
	}
	if o, err := (Options{Grep: `step_time: [0-9.]+`, Ranks: []int{1}}).compile(); err != nil || o.Container != "task" || !o.wantRank(1) || o.wantRank(0) {
		t.Errorf("good options: %+v, %v", o, err)
	}
}

func TestCursorJSON(t *testing.T) {
	c := Cursor{}
	ts := time.Date(2026, 12, 1, 10, 0, 0, 5, time.UTC)
	c.Advance(Line{Pod: "j-0-abc", Time: ts, Seq: 2, Text: "x"})
	c.Advance(Line{Pod: "j-1", Offset: 1234})
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Cursor
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, back); diff != "" {
		t.Errorf("cursor through JSON %s (-want +got):\n%s", data, diff)
	}
}
