package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// TestServerAndControllerOnMariaDB runs Falcon as it is deployed: `falcon
// migrate`, `falcon server` on MariaDB and `falcon controller` as separate
// processes, the controller reaching the server over gRPC.
func TestServerAndControllerOnMariaDB(t *testing.T) {
	// A fresh database of its own; skipped without MariaDB, failed under CI=true.
	dsn := dbtest.MySQLDSN(t)

	out, err := exec.Command(falconBin, "migrate", "--db-driver", "mysql", "--db-dsn", dsn, "-o", "json").Output()
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	// The schema reaches the newest embedded migration.
	var migrated struct {
		SchemaVersion int64 `json:"schema_version"`
	}
	// The newest is the highest number, not the count: numbers may skip.
	files, _ := fs.Glob(os.DirFS("../internal/store/sqlstore/migrations/mysql"), "*.sql")
	var newest int64
	for _, f := range files {
		n, _, _ := strings.Cut(f, "_")
		if v, err := strconv.ParseInt(n, 10, 64); err == nil && v > newest {
			newest = v
		}
	}
	if err := json.Unmarshal(out, &migrated); err != nil || newest == 0 || migrated.SchemaVersion != newest {
		t.Fatalf("migrate -o json = %s (%v), want schema_version %d", out, err, newest)
	}
	dir := t.TempDir()
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	secret := filepath.Join(dir, "controller-token")
	if err := os.WriteFile(secret, []byte("e2e-controller-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var serverLog, ctlLog bytes.Buffer
	server := exec.Command(falconBin, "server", "--db-driver", "mysql", "--db-dsn", dsn,
		"--http-addr", httpAddr, "--grpc-addr", grpcAddr, "--artifact-root", dir, "--log-dir", dir+"/logs",
		"--auth", "none", "--controller-token-file", secret)
	server.Stderr = &serverLog
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Signal(syscall.SIGTERM); server.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up:\n%s", serverLog.String())
		}
	}
	metricsAddr := freeAddr(t)
	ctl := exec.Command(falconBin, "controller", "--api-grpc", grpcAddr, "--data-dir", dir, "--local-cluster", "box", "--log-level", "debug", "--controller-token-file", secret,
		"--metrics-addr", metricsAddr)
	ctl.Stderr = &ctlLog
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Process.Signal(syscall.SIGTERM); ctl.Wait() })

	d := &dev{t: t, dataDir: dir, http: httpAddr, stderr: &serverLog}
	var clusters map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		clusters = d.mustJSON("cluster", "list")
		if len(clusters["items"].([]any)) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(d.run("", "cluster", "list").stdout, "box") {
		t.Fatalf("controller did not register its cluster: %v\n%s", clusters, ctlLog.String())
	}
	exp := d.create("name: on-mariadb\ncluster_name: box\nrole_to_task_spec:\n  main:\n    command: echo from mariadb\n    replica: 2\n")
	r := d.run("", "exp", "wait", exp["id"].(string), "--timeout", "60s")
	if r.code != 0 {
		t.Fatalf("wait: %d %s\nserver:\n%s\ncontroller:\n%s", r.code, r.stderr, serverLog.String(), ctlLog.String())
	}
	if logs := d.run("", "exp", "logs", exp["id"].(string)); strings.Count(logs.stdout, "from mariadb") != 2 {
		t.Fatalf("logs: %q", logs.stdout)
	}

	// The controller is ready and its metrics count the job it ran.
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, ctlLog.String())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("controller /readyz: %d %s", code, body)
	}
	code, body := get("/metrics")
	for _, want := range []string{`falcon_jobs_finished_total{cluster="box",reason="",status="Succeeded"} 1`, "falcon_rm_cycle_seconds_bucket"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("controller /metrics (%d) lacks %q", code, want)
		}
	}
}
