package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// BenchmarkServerColdStart measures `falcon server` from exec to a 200 on
// /readyz (serving, database answering) on a migrated database, against
// the baseline of starting the binary at all (`falcon version`). It polls
// /readyz every millisecond, so the figure is at most 1 ms late.
func BenchmarkServerColdStart(b *testing.B) {
	dir := b.TempDir()
	secret := filepath.Join(dir, "controller-token")
	if err := os.WriteFile(secret, []byte("e2e-controller-secret-0123456789abcdef\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Run("baseline=version", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command(falconBin, "version").CombinedOutput(); err != nil {
				b.Fatalf("falcon version: %v\n%s", err, out)
			}
		}
	})
	for _, db := range []struct{ name, driver, dsn string }{
		{"sqlite", "sqlite", "file:" + filepath.Join(dir, "falcon.db")},
		{"mysql", "mysql", dbtest.MySQLDSN(b)},
	} {
		if out, err := exec.Command(falconBin, "migrate", "--db-driver", db.driver, "--db-dsn", db.dsn).CombinedOutput(); err != nil {
			b.Fatalf("migrate %s: %v\n%s", db.name, err, out)
		}
		b.Run("server="+db.name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				metrics := freeAddr(b)
				cmd := exec.Command(falconBin, "server", "--db-driver", db.driver, "--db-dsn", db.dsn,
					"--http-addr", freeAddr(b), "--grpc-addr", freeAddr(b), "--metrics-addr", metrics,
					"--artifact-root", dir, "--auth", "none", "--controller-token-file", secret, "--log-level", "warn")
				t0 := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				for {
					resp, err := http.Get("http://" + metrics + "/readyz")
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
					if time.Since(t0) > 30*time.Second {
						b.Fatal("falcon server not ready in 30s")
					}
					time.Sleep(time.Millisecond)
				}
				total += time.Since(t0)
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-ready")
		})
	}
}
