package credentials_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/falconhq/falcon/internal/cli/credentials"
)

func TestStore(t *testing.T) {
	dir := t.TempDir()
	s := &credentials.Store{Path: filepath.Join(dir, "nested", credentials.FileName)}
	if _, ok, err := s.Get("https://a"); ok || err != nil {
		t.Fatalf("Get on no file = %v, %v", ok, err)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	a := credentials.Entry{Token: "tok-a", Expiry: exp, User: "a@example.com"}
	if err := s.Put("https://a", a); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("https://b", credentials.Entry{Token: "tok-b"}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Get("https://a")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	if had, err := s.Delete("https://b"); !had || err != nil {
		t.Errorf("Delete = %v, %v", had, err)
	}
	if had, err := s.Delete("https://b"); had || err != nil {
		t.Errorf("second Delete = %v, %v", had, err)
	}

	// A file someone made world-readable is replaced by a private one.
	if err := os.Chmod(s.Path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("https://a", a); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(s.Path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after a write, want 0600", fi.Mode().Perm())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(s.Path), "*.tmp")); len(leftovers) > 0 {
		t.Errorf("temp files left behind: %v", leftovers)
	}

	if err := os.WriteFile(s.Path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get("https://a"); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Get on a damaged file = %v", err)
	}
}

func TestDefault(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	s, err := credentials.Default(env(map[string]string{"HOME": "/home/a"}))
	if err != nil || s.Path != "/home/a/.falcon/credentials" {
		t.Errorf("Default(HOME) = %v, %v", s, err)
	}
	s, err = credentials.Default(env(map[string]string{"HOME": "/home/a", credentials.ConfigDirEnv: "/etc/falcon"}))
	if err != nil || s.Path != "/etc/falcon/credentials" {
		t.Errorf("Default(FALCON_CONFIG_DIR) = %v, %v", s, err)
	}
	if _, err := credentials.Default(env(nil)); err == nil {
		t.Error("Default with no HOME succeeded")
	}
}

func TestResolverToken(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &credentials.Store{Path: filepath.Join(t.TempDir(), credentials.FileName)}
	r := credentials.Resolver{Server: "https://f", Store: s, Getenv: func(string) string { return "" }, Now: func() time.Time { return now }}
	if tok, err := r.Token(context.Background()); tok != "" || err != nil {
		t.Errorf("no login: %q, %v", tok, err)
	}
	_ = s.Put("https://f", credentials.Entry{Token: "live", Expiry: now.Add(time.Second)})
	if tok, err := r.Token(context.Background()); tok != "live" || err != nil {
		t.Errorf("live login: %q, %v", tok, err)
	}
	_ = s.Put("https://f", credentials.Entry{Token: "dead", Expiry: now})
	_, err := r.Token(context.Background())
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "falcon auth login --server https://f") {
		t.Errorf("expired login: %v", err)
	}
	// An opaque FALCON_TOKEN (not a JWT) is sent as is: the server decides.
	r.Getenv = func(k string) string {
		if k == credentials.TokenEnv {
			return "opaque"
		}
		return ""
	}
	if tok, err := r.Token(context.Background()); tok != "opaque" || err != nil {
		t.Errorf("FALCON_TOKEN: %q, %v", tok, err)
	}
}
