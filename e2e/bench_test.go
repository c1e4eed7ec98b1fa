package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
)

// BenchmarkLocalLatency measures, on `falcon dev`, the time from the create
// call returning to the job's process starting, and from the process exiting
// to `Succeeded` being visible through the API. Both are dominated by how
// fast the controllers learn of a change, so they prove the wake-ups work:
// with polling alone they would sit near the poll interval (2s).
func BenchmarkLocalLatency(b *testing.B) {
	d := startDev(b, "")
	base := "http://" + d.http
	var toStart, toVisible []float64
	for i := 0; i < b.N; i++ {
		body := fmt.Sprintf(`{"experiment":{"name":"lat-%d","role_to_task_spec":{"main":{"replica":1,
			"command":"date +%%s%%N > $FALCON_ARTIFACT_DIR/start; date +%%s%%N > $FALCON_ARTIFACT_DIR/end"}}}}`, i)
		t0 := time.Now()
		resp, err := http.Post(base+"/v1/experiments", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var exp struct {
			ID           string `json:"id"`
			ArtifactPath string `json:"artifact_path"`
		}
		json.NewDecoder(resp.Body).Decode(&exp)
		resp.Body.Close()
		var seen time.Time
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			r, err := http.Get(base + "/v1/experiments/" + exp.ID)
			if err != nil {
				b.Fatal(err)
			}
			var st struct{ Status string }
			json.NewDecoder(r.Body).Decode(&st)
			r.Body.Close()
			if st.Status == "Succeeded" {
				seen = time.Now()
				break
			}
			if st.Status == "Failed" || st.Status == "Aborted" {
				b.Fatalf("experiment %s ended %s", exp.ID, st.Status)
			}
		}
		if seen.IsZero() {
			b.Fatalf("experiment %s did not succeed in 30s", exp.ID)
		}
		start, end := readNanos(b, filepath.Join(exp.ArtifactPath, "start")), readNanos(b, filepath.Join(exp.ArtifactPath, "end"))
		toStart = append(toStart, float64(start.Sub(t0).Microseconds())/1000)
		toVisible = append(toVisible, float64(seen.Sub(end).Microseconds())/1000)
	}
	b.ReportMetric(pct(toStart, 50), "create-to-start-p50-ms")
	b.ReportMetric(pct(toStart, 99), "create-to-start-p99-ms")
	b.ReportMetric(pct(toVisible, 50), "exit-to-succeeded-p50-ms")
	b.ReportMetric(pct(toVisible, 99), "exit-to-succeeded-p99-ms")
}

func readNanos(b *testing.B, path string) time.Time {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, n)
}

func pct(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(i-1, len(s)-1))]
}

// BenchmarkExpList100k measures what a user waits for when listing
// experiments on `falcon dev` holding 100,000 of them: the HTTP call
// (GET /v1/experiments, first page and filtered) and the whole `falcon exp
// list -o json` command, process start included.
func BenchmarkExpList100k(b *testing.B) {
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
	// Finished experiments only: the controllers have nothing to do.
	statuses := []lifecycle.Status{lifecycle.Succeeded, lifecycle.Failed, lifecycle.Aborted}
	t0 := time.Now().Add(-rows * time.Second).UTC()
	err = sqlstore.SeedExps(ctx, st, rows, func(i int) *store.Experiment {
		at := t0.Add(time.Duration(i) * time.Second)
		return &store.Experiment{
			ID: ids.New(ids.Experiment), Name: fmt.Sprintf("seeded-%06d", i), ExpType: "train",
			ClusterName: "local", Config: `{"lr": 0.1}`, Status: statuses[i%len(statuses)],
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

	for _, c := range []struct{ name, query string }{
		{"http-first-page", "?page_size=50"},
		{"http-status", "?page_size=50&status=Failed"},
		{"http-creator", "?page_size=50&creator=user-42@example.com"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(base + "/v1/experiments" + c.query)
				if err != nil {
					b.Fatal(err)
				}
				var page struct{ Items []json.RawMessage }
				err = json.NewDecoder(resp.Body).Decode(&page)
				resp.Body.Close()
				if err != nil || len(page.Items) != 50 {
					b.Fatalf("got %d items (%v), want 50", len(page.Items), err)
				}
			}
		})
	}
	b.Run("cli-exp-list", func(b *testing.B) {
		d := d.with(b)
		for b.Loop() {
			if r := d.run("", "exp", "list", "--limit", "50", "-o", "json"); r.code != 0 {
				b.Fatalf("exp list: exit %d: %s", r.code, r.stderr)
			}
		}
	})
}
