package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

func mins(d time.Duration) string { return strconv.FormatFloat(d.Minutes(), 'f', 1, 64) }

// WriteTable prints the policies side by side, then waits per user and
// each cluster's use; md renders Markdown tables.
func WriteTable(w io.Writer, rs []*Result, md bool) error {
	var b strings.Builder
	table := func(header []string, rows [][]string) {
		if md {
			b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
			for range header {
				b.WriteString("---|")
			}
			b.WriteString("\n")
			for _, r := range rows {
				b.WriteString("| " + strings.Join(r, " | ") + " |\n")
			}
			b.WriteString("\n")
			return
		}
		width := make([]int, len(header))
		for _, r := range append([][]string{header}, rows...) {
			for i, c := range r {
				width[i] = max(width[i], len(c))
			}
		}
		for _, r := range append([][]string{header}, rows...) {
			for i, c := range r {
				if i == 0 {
					fmt.Fprintf(&b, "%-*s", width[i], c)
				} else {
					fmt.Fprintf(&b, "  %*s", width[i], c)
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	header := []string{"policy"}
	for _, r := range rs {
		header = append(header, r.Policy)
	}
	row := func(label string, f func(r *Result) string) []string {
		out := []string{label}
		for _, r := range rs {
			out = append(out, f(r))
		}
		return out
	}
	perJob := 0
	for _, r := range rs {
		perJob = max(perJob, r.Jobs)
	}
	table(header, [][]string{
		row("jobs", func(r *Result) string { return strconv.Itoa(r.Jobs) }),
		row("pools created", func(r *Result) string { return strconv.Itoa(r.PoolsCreated) }),
		row("pools created / jobs", func(r *Result) string { return fmt.Sprintf("%.0f%%", 100*float64(r.PoolsCreated)/float64(r.Jobs)) }),
		row("jobs on a reused pool", func(r *Result) string { return strconv.Itoa(r.Reused) }),
		row("pool-min busy", func(r *Result) string { return mins(r.PoolBusy) }),
		row("pool-min idle", func(r *Result) string { return mins(r.PoolIdle) }),
		row("  before 1st job", func(r *Result) string { return mins(r.IdleFirst) }),
		row("  between jobs", func(r *Result) string { return mins(r.IdleBetween) }),
		row("  after last job", func(r *Result) string { return mins(r.IdleLast) }),
		row("idle / busy", func(r *Result) string {
			return fmt.Sprintf("%.1f%%", 100*float64(r.PoolIdle)/float64(max(r.PoolBusy, 1)))
		}),
		row("pool-min total", func(r *Result) string { return mins(r.PoolTotal) }),
		row("wait mean (min)", func(r *Result) string { return mins(r.WaitMean) }),
		row("wait p95 (min)", func(r *Result) string { return mins(r.WaitP95) }),
		row("wait max (min)", func(r *Result) string { return mins(r.WaitMax) }),
		row("Jain (users' mean waits)", func(r *Result) string { return fmt.Sprintf("%.3f", r.Jain) }),
		row("worst p95 / median p95", func(r *Result) string { return fmt.Sprintf("%.2f", r.WorstP95OverMedian) }),
		row("makespan (h)", func(r *Result) string { return fmt.Sprintf("%.2f", r.Makespan.Hours()) }),
	})
	if len(rs) > 0 {
		var rows [][]string
		for i, u := range rs[0].Users {
			rows = append(rows, row(fmt.Sprintf("%s (%d)", u.User, u.Jobs), func(r *Result) string {
				x := r.Users[i]
				return mins(x.Mean) + " / " + mins(x.P95) + " / " + mins(x.Max)
			}))
		}
		table(append([]string{"wait per user, min (mean / p95 / max)"}, header[1:]...), rows)
		rows = nil
		for i, c := range rs[0].Clusters {
			rows = append(rows, row(c.Cluster, func(r *Result) string {
				x := r.Clusters[i]
				return fmt.Sprintf("%d pools, %.0f%% busy, %d flex", x.PoolsCreated, 100*x.Utilisation, x.FlexStart)
			}))
		}
		table(append([]string{"cluster use"}, header[1:]...), rows)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Timeline formats are what --out-format takes.
const (
	FormatCSV     = "csv"
	FormatParquet = "parquet"
)

// TimelineFormats lists them, for errors.
const TimelineFormats = "csv, parquet"

// TimelineRow is one job of a timeline file: a CSV row, or a Parquet row
// with these column names and types (times as UTC timestamps in
// milliseconds, the wait in whole seconds).
type TimelineRow struct {
	Index       int64     `parquet:"index"`
	User        string    `parquet:"user"`
	Accelerator string    `parquet:"accelerator"`
	Topology    string    `parquet:"topology"`
	Hosts       int64     `parquet:"hosts"`
	Cluster     string    `parquet:"cluster"`
	Pool        string    `parquet:"pool"`
	CreatedPool bool      `parquet:"created_pool"`
	PoolFor     int64     `parquet:"pool_created_for"`
	Submitted   time.Time `parquet:"submitted,timestamp(millisecond)"`
	Picked      time.Time `parquet:"picked,timestamp(millisecond)"`
	Started     time.Time `parquet:"started,timestamp(millisecond)"`
	Ended       time.Time `parquet:"ended,timestamp(millisecond)"`
	WaitS       int64     `parquet:"wait_s"`
}

// TimelineHeader is the CSV header, the Parquet column names in order.
var TimelineHeader = []string{"index", "user", "accelerator", "topology", "hosts", "cluster", "pool", "created_pool", "pool_created_for",
	"submitted", "picked", "started", "ended", "wait_s"}

// Row is j as a timeline file holds it.
func (j JobRecord) Row() TimelineRow {
	return TimelineRow{Index: int64(j.Index), User: j.User, Accelerator: j.Accelerator, Topology: j.Topology, Hosts: int64(j.Hosts),
		Cluster: j.Cluster, Pool: j.Pool, CreatedPool: j.CreatedPool, PoolFor: int64(j.PoolFor),
		Submitted: j.Submitted.UTC(), Picked: j.Picked.UTC(), Started: j.Started.UTC(), Ended: j.Ended.UTC(),
		WaitS: int64(j.Wait.Round(time.Second) / time.Second)}
}

// CSV is the row as CSV fields, in TimelineHeader's order.
func (r TimelineRow) CSV() []string {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	return []string{strconv.FormatInt(r.Index, 10), r.User, r.Accelerator, r.Topology, strconv.FormatInt(r.Hosts, 10), r.Cluster, r.Pool,
		strconv.FormatBool(r.CreatedPool), strconv.FormatInt(r.PoolFor, 10),
		ts(r.Submitted), ts(r.Picked), ts(r.Started), ts(r.Ended), strconv.FormatInt(r.WaitS, 10)}
}

// TimelineFile is the file WriteTimelines writes a policy's timeline to,
// within its directory.
func TimelineFile(policy, format string) string {
	return strings.NewReplacer("/", "_", "=", "-", "+", "_").Replace(policy) + "." + format
}

// WriteTimelines writes DIR/<policy>.<format> per result, one row per job:
// format is csv or parquet.
func WriteTimelines(dir, format string, rs []*Result) error {
	if format != FormatCSV && format != FormatParquet {
		return fmt.Errorf("--out-format %s: allowed: %s", format, TimelineFormats)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, r := range rs {
		rows := make([]TimelineRow, len(r.Timeline))
		for i, j := range r.Timeline {
			rows[i] = j.Row()
		}
		path := filepath.Join(dir, TimelineFile(r.Policy, format))
		var err error
		if format == FormatParquet {
			err = parquet.WriteFile(path, rows)
		} else {
			err = writeCSV(path, rows)
		}
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}

func writeCSV(path string, rows []TimelineRow) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write(TimelineHeader)
	for _, r := range rows {
		_ = cw.Write(r.CSV())
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
