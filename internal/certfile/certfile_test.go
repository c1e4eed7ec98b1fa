package certfile_test

import (
	"crypto/tls"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/certfile"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/testenv/certtest"
)

func TestNewReloaderRefusesBadFiles(t *testing.T) {
	ca := certtest.NewCA(t)
	dir := t.TempDir()
	cert, key, _ := ca.WriteServer(t, dir, "localhost")
	otherDir := t.TempDir()
	_, otherKey, _ := ca.WriteServer(t, otherDir, "localhost")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A path through a file cannot be opened, whoever runs the test (root
	// reads a file of mode 0).
	unreadable := filepath.Join(cert, "tls.key")
	for _, tt := range []struct {
		name, cert, key string
		flag, want      string
	}{
		{"neither", "", "", "--tls-cert-file", "is required"},
		{"no cert", "", key, "--tls-cert-file", "is required with --tls-key-file"},
		{"no key", cert, "", "--tls-key-file", "is required with --tls-cert-file"},
		{"missing cert", filepath.Join(dir, "nope.crt"), key, "--tls-cert-file", "no such file"},
		{"missing key", cert, filepath.Join(dir, "nope.key"), "--tls-key-file", "no such file"},
		{"directory", dir, key, "--tls-cert-file", "is a directory"},
		{"not PEM", garbage, key, "--tls-cert-file", "do not form a certificate and its key"},
		{"key of another certificate", cert, otherKey, "--tls-cert-file", "do not form a certificate and its key"},
		{"unreadable", cert, unreadable, "--tls-key-file", "cannot read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := certfile.NewReloader(tt.cert, tt.key)
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.flag || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewReloader(%q, %q) = %v; want an error on %s containing %q", tt.cert, tt.key, err, tt.flag, tt.want)
			}
		})
	}
}

// fakeClock is stepped by the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func serialOf(t *testing.T, c *tls.Certificate) *big.Int {
	t.Helper()
	if c.Leaf == nil {
		t.Fatal("certificate has no parsed leaf")
	}
	return c.Leaf.SerialNumber
}

// touch moves both files' modification times so a rewrite within the same
// clock tick of the file system still looks changed.
func touch(t *testing.T, at time.Time, files ...string) {
	t.Helper()
	for _, f := range files {
		if err := os.Chtimes(f, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReloaderPicksUpRotatedFiles(t *testing.T) {
	ca := certtest.NewCA(t)
	dir := t.TempDir()
	cert, key, first := ca.WriteServer(t, dir, "localhost")
	clock := &fakeClock{t: time.Now()}
	r, err := certfile.NewReloader(cert, key, certfile.WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	if got := serialOf(t, r.Certificate()); got.Cmp(first) != 0 {
		t.Fatalf("serial %v, want %v", got, first)
	}
	_, _, second := ca.WriteServer(t, dir, "localhost")
	touch(t, time.Now().Add(time.Minute), cert, key)
	// Within CheckInterval of the last look the files are not read.
	if got := serialOf(t, r.Certificate()); got.Cmp(first) != 0 {
		t.Fatalf("reloaded before CheckInterval: serial %v, want %v", got, first)
	}
	clock.step(certfile.CheckInterval)
	if got := serialOf(t, r.Certificate()); got.Cmp(second) != 0 {
		t.Fatalf("after rotation: serial %v, want %v", got, second)
	}

	// A half-written pair (new certificate, old key) keeps the one in use.
	c3, _, _ := ca.Issue(t, "localhost")
	if err := os.WriteFile(cert, c3, 0o600); err != nil {
		t.Fatal(err)
	}
	touch(t, time.Now().Add(2*time.Minute), cert)
	clock.step(certfile.CheckInterval)
	if got := serialOf(t, r.Certificate()); got.Cmp(second) != 0 {
		t.Fatalf("after a broken pair: serial %v, want the previous %v", got, second)
	}
	// Its key arriving completes the rotation.
	_, _, fourth := ca.WriteServer(t, dir, "localhost")
	touch(t, time.Now().Add(3*time.Minute), cert, key)
	clock.step(certfile.CheckInterval)
	if got := serialOf(t, r.Certificate()); got.Cmp(fourth) != 0 {
		t.Fatalf("after the pair was completed: serial %v, want %v", got, fourth)
	}

	// Files gone for a moment keep the certificate in use.
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	clock.step(certfile.CheckInterval)
	if got := serialOf(t, r.Certificate()); got.Cmp(fourth) != 0 {
		t.Fatalf("with the key gone: serial %v, want %v", got, fourth)
	}
}

// TestHandshakeAfterRotation serves TLS on loopback and rotates the
// certificate under a running listener: a client trusting only the CA
// connects before and after, and sees the new certificate without a
// restart.
func TestHandshakeAfterRotation(t *testing.T) {
	ca := certtest.NewCA(t)
	dir := t.TempDir()
	cert, key, first := ca.WriteServer(t, dir, "falcon-server.falcon.svc", "127.0.0.1")
	clock := &fakeClock{t: time.Now()}
	r, err := certfile.NewReloader(cert, key, certfile.WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig("h2"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()
	caFile := ca.WriteCA(t, dir)
	dialSerial := func(serverName string) (*big.Int, error) {
		cfg, err := certfile.ClientConfig("--api-ca-file", caFile, serverName)
		if err != nil {
			return nil, err
		}
		cfg.NextProtos = []string{"h2"}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Errorf("ALPN %q, want h2", p)
		}
		return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
	}
	if got, err := dialSerial("falcon-server.falcon.svc"); err != nil || got.Cmp(first) != 0 {
		t.Fatalf("first dial: %v, %v; want serial %v", got, err, first)
	}
	// The name check is real: a name the certificate lacks is refused.
	if _, err := dialSerial("elsewhere.example"); err == nil || !strings.Contains(err.Error(), "certificate is valid for") {
		t.Fatalf("dial with a wrong server name: %v; want a name mismatch", err)
	}
	_, _, second := ca.WriteServer(t, dir, "falcon-server.falcon.svc", "127.0.0.1")
	touch(t, time.Now().Add(time.Minute), cert, key)
	clock.step(certfile.CheckInterval)
	if got, err := dialSerial("falcon-server.falcon.svc"); err != nil || got.Cmp(second) != 0 {
		t.Fatalf("after rotation: %v, %v; want serial %v", got, err, second)
	}
}

func TestClientConfigRefusesBadCA(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(garbage, []byte("nothing here"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.crt"), "no such file"},
		{garbage, "holds no PEM certificate"},
	} {
		_, err := certfile.ClientConfig("--api-ca-file", tt.file, "")
		var fe *errdefs.FieldError
		if !errors.As(err, &fe) || fe.Field != "--api-ca-file" || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ClientConfig(%q) = %v; want an error on --api-ca-file containing %q", tt.file, err, tt.want)
		}
	}
}
