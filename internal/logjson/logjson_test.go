package logjson_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/logjson"
)

// protoJSON is how the gateway writes messages.
var protoJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// The logs route writes its chunks by hand; they must mean exactly what
// the gateway's protojson chunks mean.
func TestLogChunkIsProtoJSON(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	msg := &falconv1.LogLines{Lines: []*falconv1.LogLine{
		{JobId: "job-1", Role: "main", Rank: 0, Pod: "job-1-0", Line: "plain"},
		{JobId: "job-1", Role: "main", Rank: 3, Pod: "p", Line: `quotes " and \ backslash`, Time: timestamppb.New(t0)},
		{Line: "tab\tnewline\ncr\rbell\x07nul\x00esc\x1b", Time: timestamppb.New(t0.Add(500 * time.Millisecond))},
		{Line: "ünïcødé 日本語 🚀 \u2028 \u2029 <html>&amp;", Time: timestamppb.New(t0.Add(123456 * time.Microsecond))},
		{Line: strings.Repeat("x", 100000), Time: timestamppb.New(t0.Add(123456789)), Resume: "eyJ4Ijp7fX0"},
		{Rank: -1, Time: timestamppb.New(t0.Add(1000))},
	}}
	got := logjson.AppendChunk(nil, msg)
	if !strings.HasSuffix(string(got), "}\n") || strings.Count(string(got), "\n") != 1 {
		t.Fatalf("not one line: %q", got)
	}
	var fast, slow any
	if err := json.Unmarshal(got, &fast); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	inner, err := protoJSON.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"result":`+string(inner)+`}`), &slow); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slow, fast); diff != "" {
		t.Errorf("fast chunk differs from protojson (-protojson +fast):\n%s", diff)
	}
	for _, ts := range []time.Time{t0, t0.Add(time.Millisecond), t0.Add(time.Microsecond), t0.Add(1)} {
		want, _ := protoJSON.Marshal(timestamppb.New(ts))
		if got := `"` + string(logjson.AppendTime(nil, ts)) + `"`; got != string(want) {
			t.Errorf("time %v: %s; protojson %s", ts, got, want)
		}
	}
}

// What AppendChunk writes, DecodeLines reads back as the same messages.
func TestDecodeLinesRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	in := []*falconv1.LogLine{
		{JobId: "job-1", Role: "main", Rank: 2, Pod: "p", Line: "a \"b\" \u2028 ü", Time: timestamppb.New(t0), Resume: "tok"},
		{Line: "no time", Rank: -1},
	}
	chunk := logjson.AppendChunk(nil, &falconv1.LogLines{Lines: in})
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(chunk, &env); err != nil {
		t.Fatal(err)
	}
	out, err := logjson.DecodeLines(env.Result)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out, protocmp.Transform()); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
	if _, err := logjson.DecodeLines([]byte(`{"lines":[{"time":"yesterday"}]}`)); err == nil {
		t.Error("a bad time decoded")
	}
}

// DecodeChunk reads AppendChunk's chunks with its own scanner and any other
// form of the same JSON (as a proxy might re-encode it) with encoding/json,
// to the same lines; an error chunk is not lines.
func TestDecodeChunk(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 5000, time.UTC)
	in := []*falconv1.LogLine{
		{JobId: "job-1", Role: "main", Rank: 2, Pod: "p", Line: "tab\there \"q\" \\ \u2028 ünï 🚀 \x01", Time: timestamppb.New(t0), Resume: "tok"},
		{Line: "", Rank: -1},
	}
	chunk := logjson.AppendChunk(nil, &falconv1.LogLines{Lines: in})
	chunk = chunk[:len(chunk)-1]
	for name, c := range map[string][]byte{
		"own form":  chunk,
		"reordered": []byte(`{"result": {"lines": [{"line": "tab\there \"q\" \\ \u2028 ünï 🚀 \u0001", "rank": 2, "job_id": "job-1", "role": "main", "pod": "p", "time": "2026-12-01T10:00:00.000005Z", "resume": "tok"}, {"rank": -1, "line": ""}]}}`),
	} {
		out, ok, err := logjson.DecodeChunk(c)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", name, ok, err)
		}
		if diff := cmp.Diff(in, out, protocmp.Transform()); diff != "" {
			t.Errorf("%s (-in +out):\n%s", name, diff)
		}
	}
	if _, ok, err := logjson.DecodeChunk([]byte(`{"error":{"code":5,"message":"gone"}}`)); ok || err != nil {
		t.Errorf("error chunk: ok=%v err=%v", ok, err)
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	var lines []*falconv1.LogLine
	for range 1024 {
		lines = append(lines, &falconv1.LogLine{JobId: "job-b1m99lz8yi", Role: "main", Pod: "job-b1m99lz8yi-0", Line: "step=12345 loss=0.123456 tflops=312.5 the quick brown fox jumps over the lazy dog padding.."})
	}
	chunk := logjson.AppendChunk(nil, &falconv1.LogLines{Lines: lines})
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if _, _, err := logjson.DecodeChunk(chunk[:len(chunk)-1]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1024*b.N)/b.Elapsed().Seconds(), "lines/s")
}
