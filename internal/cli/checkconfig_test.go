package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/testenv/certtest"
)

// `falcon server --check-config` as a CI/CD gate runs it: exit 0 and every
// check ok on a good configuration; exit 1 naming each failed check, with
// the flag to fix, on a bad one.
func TestServerCheckConfig(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "token")
	if err := os.WriteFile(secretFile, []byte(auth.GenerateControllerSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := certtest.NewCA(t)
	cert, key, _ := ca.WriteServer(t, dir, "falcon-server.falcon.svc")
	db := filepath.Join(dir, "falcon.db")
	if r := invoke(t, "", false, "migrate", "--db-driver", "sqlite", "--db-dsn", db); r.code != 0 {
		t.Fatalf("migrate: %d %s", r.code, r.stderr)
	}
	good := []string{"server", "--check-config", "--db-driver", "sqlite", "--db-dsn", db, "--auth", "none",
		"--artifact-root", "file://" + dir, "--controller-token-file", secretFile,
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--tls-cert-file", cert, "--tls-key-file", key}

	type check struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	parse := func(t *testing.T, out string) map[string]check {
		var res struct{ Checks []check }
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		m := map[string]check{}
		for _, c := range res.Checks {
			m[c.Name] = c
		}
		return m
	}

	r := invoke(t, "", false, append(good, "-o", "json")...)
	if r.code != 0 {
		t.Fatalf("good configuration: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checks := parse(t, r.stdout)
	for _, name := range []string{"controller secret", "tls", "auth", "database", "artifact root"} {
		if c, ok := checks[name]; !ok || !c.OK {
			t.Errorf("check %q: %+v", name, c)
		}
	}
	if d := checks["tls"].Detail; !strings.Contains(d, "falcon-server.falcon.svc") || !strings.Contains(d, "valid until") {
		t.Errorf("tls detail %q does not say what the certificate is for and until when", d)
	}
	if d := checks["database"].Detail; !strings.Contains(d, "sqlite reachable; schema at version") {
		t.Errorf("database detail %q", d)
	}

	bad := []string{"server", "--check-config", "-o", "json", "--db-driver", "sqlite", "--db-dsn", filepath.Join(dir, "empty.db"),
		"--auth", "none", "--artifact-root", "s3://bucket", "--controller-token-file", secretFile,
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--tls-cert-file", cert, "--tls-key-file", filepath.Join(dir, "missing.key")}
	r = invoke(t, "", false, bad...)
	if r.code != 1 {
		t.Fatalf("bad configuration: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	checks = parse(t, r.stdout)
	for name, want := range map[string]string{
		"tls":           "--tls-key-file: cannot read",
		"database":      "--migrate: the database schema is at version 0",
		"artifact root": "--artifact-root:",
	} {
		if c := checks[name]; c.OK || !strings.Contains(c.Detail, want) {
			t.Errorf("check %q: %+v; want a failure containing %q", name, c, want)
		}
	}
	if !checks["auth"].OK || !checks["controller secret"].OK {
		t.Errorf("checks that should pass: %+v", checks)
	}
	if !strings.Contains(r.stderr, "configuration check failed: tls, database, artifact root") {
		t.Errorf("stderr %q does not name the failed checks", r.stderr)
	}
}
