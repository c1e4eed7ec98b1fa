package runmetrics

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzFeedFile holds the hand scanner to encoding/json: a line is skipped
// exactly when it is not a JSON object (or breaks the step and range
// rules), and the points are its numeric fields as json.Unmarshal reads
// them.
func FuzzFeedFile(f *testing.F) {
	for _, s := range []string{
		`{"step": 10, "step_time": 0.41, "tflops": 312.5}`,
		`{"a": {"b": [1, "}", {"c": 2}]}, "d": -0.5e-3, "e": "x\"y", "f": true, "g": null}`,
		`{"lo\u0073s": 1, "loss": 2}`, `{"step": 1e2}`, `{"x": 1e999}`, `[1]`, `{`, `{"a":1}x`, ` {} `, `{"step": "1"}`,
		`{"a": 1, "a": 2}`, `{"\u0000": 1}`, `{"a"  :  1 , "b":2}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e := NewExtractor(nil, Cursor{FileLines: 7})
		got := e.FeedFile(nil, []byte(line))
		skipped := e.Cursor().FileSkipped == 1

		trimmed := bytes.TrimSpace([]byte(line))
		if len(trimmed) == 0 {
			if got != nil || skipped {
				t.Fatalf("blank line gave %v, skipped %v", got, skipped)
			}
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(trimmed, &obj); err != nil || trimmed[0] != '{' {
			if !skipped || got != nil {
				t.Fatalf("not an object (%v) but skipped=%v, points %v", err, skipped, got)
			}
			return
		}
		step, wantSkip := int64(7), false
		want := map[string]float64{}
		for k, raw := range obj {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				// A number beyond float64: encoding/json refuses it too.
				wantSkip = true
				continue
			}
			if k == StepField {
				f, ok := v.(float64)
				if !ok || f < 0 || f != math.Trunc(f) || f >= 1<<63 {
					if s, err := json.Number(raw).Int64(); err == nil && s >= 0 {
						step = s // precise beyond 2^53
						continue
					}
					wantSkip = true
				} else if s, err := json.Number(raw).Int64(); err == nil {
					step = s
				} else {
					step = int64(f)
				}
				continue
			}
			if f, ok := v.(float64); ok && validName(k) {
				want[k] = f
			}
		}
		if wantSkip {
			if !skipped || got != nil {
				t.Fatalf("want skipped; got skipped=%v, points %v", skipped, got)
			}
			return
		}
		if skipped {
			t.Fatalf("skipped a valid line; want %v", want)
		}
		gotMap := map[string]float64{}
		for _, p := range got {
			if _, dup := gotMap[p.Name]; dup {
				t.Fatalf("%s twice in %v", p.Name, got)
			}
			if p.Step != step || p.Source != SourceFile {
				t.Fatalf("point %+v; want step %d from the file", p, step)
			}
			gotMap[p.Name] = p.Value
		}
		if diff := cmp.Diff(want, gotMap); diff != "" {
			t.Fatalf("points (-want +got):\n%s", diff)
		}
	})
}
