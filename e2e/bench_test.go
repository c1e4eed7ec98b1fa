package e2e

import (
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
