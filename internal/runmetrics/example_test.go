package runmetrics_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/falconhq/falcon/internal/runmetrics"
)

// A caller extracts while the job runs and again when it ends, keeping the
// cursor beside the points (in one transaction, in Falcon's store).
func Example() {
	patterns, err := runmetrics.Compile([]runmetrics.Spec{
		{Name: "step_time", Pattern: `step_time: (?P<value>[0-9.]+)`, Better: runmetrics.BetterLower},
	})
	if err != nil {
		panic(err)
	}
	var stored []runmetrics.Point
	var cursor []byte // persisted JSON
	store := func(e *runmetrics.Extractor) func([]runmetrics.Point) error {
		return func(pts []runmetrics.Point) error {
			stored = append(stored, pts...) // the slice is reused: copy
			cursor, err = json.Marshal(e.Cursor())
			return err
		}
	}

	// While the job runs: its log so far ends in the middle of a line.
	log := "step_time: 0.50\nwarmup done\nstep_time: 0.4"
	e := runmetrics.NewExtractor(patterns, runmetrics.Cursor{})
	if err := e.ReadLog(strings.NewReader(log), false, store(e)); err != nil {
		panic(err)
	}

	// Later, maybe in another process: the job has ended.
	log += "1\nstep_time: 1.2.3\n"
	var c runmetrics.Cursor
	if err := json.Unmarshal(cursor, &c); err != nil {
		panic(err)
	}
	e = runmetrics.NewExtractor(patterns, c)
	if err := e.ReadLog(strings.NewReader(log[c.LogOffset:]), true, store(e)); err != nil {
		panic(err)
	}

	r := runmetrics.Summarize(stored, patterns.Specs())
	for _, s := range r.Metrics {
		fmt.Printf("%s: count %d first %.2f last %.2f median %.3f (%s is better)\n", s.Name, s.Count, s.First, s.Last, s.Median, s.Better)
	}
	fmt.Println("skipped lines:", e.Cursor().Skipped())
	// Output:
	// step_time: count 2 first 0.50 last 0.41 median 0.455 (lower is better)
	// skipped lines: 1
}
