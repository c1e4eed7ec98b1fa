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

// WriteTimelines writes DIR/<policy>.csv per result: one row per job.
func WriteTimelines(dir string, rs []*Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, r := range rs {
		name := strings.NewReplacer("/", "_", "=", "-", "+", "_").Replace(r.Policy) + ".csv"
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		cw := csv.NewWriter(f)
		_ = cw.Write([]string{"index", "user", "accelerator", "topology", "hosts", "cluster", "pool", "created_pool", "pool_created_for",
			"submitted", "picked", "started", "ended", "wait_s"})
		for _, j := range r.Timeline {
			_ = cw.Write([]string{strconv.Itoa(j.Index), j.User, j.Accelerator, j.Topology, strconv.Itoa(j.Hosts), j.Cluster, j.Pool,
				strconv.FormatBool(j.CreatedPool), strconv.Itoa(j.PoolFor),
				j.Submitted.UTC().Format(time.RFC3339), j.Picked.UTC().Format(time.RFC3339), j.Started.UTC().Format(time.RFC3339),
				j.Ended.UTC().Format(time.RFC3339), strconv.FormatFloat(j.Wait.Seconds(), 'f', 0, 64)})
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			f.Close()
			return fmt.Errorf("--out: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	return nil
}
