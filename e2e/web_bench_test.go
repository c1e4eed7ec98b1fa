package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/web"
)

// BenchmarkDashboard100k measures the experiments page of /ui on falcon dev
// holding 100,000 experiments (seeded as BenchmarkExpList100k seeds them):
// the server's answer (the whole HTML page, first page and filtered), and
// in headless Chromium the time from navigation to the first contentful
// paint. It reports the bytes of the assets the page loads.
func BenchmarkDashboard100k(b *testing.B) {
	const rows = 100_000
	dir := b.TempDir()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "falcon.db")))
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	statuses := []lifecycle.Status{lifecycle.Succeeded, lifecycle.Failed, lifecycle.Aborted}
	t0 := time.Now().Add(-rows * time.Second).UTC()
	err = sqlstore.SeedExps(ctx, st, rows, func(i int) *store.Experiment {
		at := t0.Add(time.Duration(i) * time.Second)
		return &store.Experiment{
			ID: ids.New(ids.Experiment), Name: fmt.Sprintf("seeded-%06d", i), ExpType: "train",
			ClusterName: "local", Config: `{"lr": 0.1}`, Status: statuses[i%len(statuses)], Tags: []string{fmt.Sprintf("t%d", i%10)},
			RoleToTaskSpec: map[string]store.TaskSpec{"w": {Command: "python train.py", Replica: 1}},
			Creator:        fmt.Sprintf("user-%d@example.com", i%100), CreatorID: fmt.Sprintf("u-%d", i%100),
			CreatedAt: at, UpdatedAt: at, FinishedAt: &at,
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	d := startDev(b, dir)
	base := "http://" + d.http

	row := regexp.MustCompile(`<tr data-exp-id=`)
	for _, c := range []struct {
		name, query string
		want        int
	}{
		{"http-first-page", "", 50},
		{"http-status", "?status=Failed", 50},
		{"http-creator", "?creator=user-42@example.com", 50},
		{"http-tag", "?tag=t3", 50},                  // one experiment in ten
		{"http-name-rare", "?name=seeded-099999", 1}, // a scan of the budget, 2,000 rows
		{"http-name-none", "?name=no-such-name", 0},  // the same, finding nothing
		{"http-creator-200-rows", "?creator=user-7@example.com&limit=200", 200},
	} {
		b.Run(c.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				resp, err := http.Get(base + "/ui/" + c.query)
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%d %v", resp.StatusCode, err)
				}
				if n := len(row.FindAllIndex(body, -1)); n != c.want {
					b.Fatalf("%d rows, want %d: the page must show one page, never the 10^5", n, c.want)
				}
				size = len(body)
			}
			b.ReportMetric(float64(size), "html-bytes")
		})
	}

	// The same tab loads the page again and again, as a user returning to
	// it does (the assets cached); the plain-text /healthz beside it is
	// what this browser takes to paint anything at all.
	tb := newTab(b)
	for _, c := range []struct{ name, path, ready string }{
		{"browser-first-render", "/ui/", `document.querySelectorAll("tr[data-exp-id]").length === 50`},
		{"browser-baseline-healthz", "/healthz", `document.body && document.body.textContent.startsWith("ok")`},
	} {
		b.Run(c.name, func(b *testing.B) {
			tb := tb.with(b)
			var ttfb, fcps, dcl []float64
			for b.Loop() {
				tb.do(chromedp.Navigate(base + c.path))
				tb.until("a first contentful paint", `performance.getEntriesByName("first-contentful-paint").length > 0 && `+c.ready)
				fcps = append(fcps, eval[float64](tb, `performance.getEntriesByName("first-contentful-paint")[0].startTime`))
				ttfb = append(ttfb, eval[float64](tb, `performance.getEntriesByType("navigation")[0].responseStart`))
				dcl = append(dcl, eval[float64](tb, `performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd`))
			}
			b.ReportMetric(median(ttfb), "ttfb-ms")
			b.ReportMetric(median(dcl), "dcl-ms")
			b.ReportMetric(median(fcps), "fcp-ms")
			b.ReportMetric(slices.Max(fcps), "fcp-max-ms")
		})
	}
	// A plain-text page makes the browser ask for /favicon.ico, which the
	// server has not; the dashboard's pages name theirs.
	favicon := func(m chromedp.ConsoleMessage) bool { return strings.HasSuffix(m.URL, "/favicon.ico") }
	if p := tb.problems(favicon); len(p) > 0 {
		b.Errorf("the console has errors:\n%s", strings.Join(p, "\n"))
	}

	b.Run("assets", func(b *testing.B) {
		var raw, zipped int
		for b.Loop() {
			raw, zipped = 0, 0
			for name, n := range web.AssetSizes() {
				resp, err := http.Get(base + "/ui/assets/" + name)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if len(body) != n {
					b.Fatalf("%s: served %d bytes, embedded %d", name, len(body), n)
				}
				var z bytes.Buffer
				w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
				_, _ = w.Write(body)
				_ = w.Close()
				raw += n
				zipped += z.Len()
			}
		}
		b.ReportMetric(float64(raw), "asset-bytes")
		b.ReportMetric(float64(zipped), "asset-gzip-bytes")
	})
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
