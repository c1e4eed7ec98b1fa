package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/certtest"
)

// freeAddr is a loopback address nothing listens on, for servers whose
// address the test must know before they start (the metrics port).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServer runs Server with cfg until the test ends and returns its
// HTTP and gRPC addresses.
func startServer(t *testing.T, cfg ServerConfig) (httpAddr, grpcAddr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg.Ready = func(h, g string) { ready <- [2]string{h, g} }
	go func() { done <- Server(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	select {
	case a := <-ready:
		return a[0], a[1]
	case err := <-done:
		done <- nil
		t.Fatalf("server did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start in 30s")
	}
	return "", ""
}

func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServerOverTLS runs `falcon server` with a certificate and a
// controller that trusts only its CA: the controller gets in, plaintext
// does not, a wrong server name is refused, the gateway serves HTTPS, and
// a rotated certificate is served without a restart.
func TestServerOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	const name = "falcon-server.falcon.svc"
	certFile, keyFile, first := ca.WriteServer(t, dir, name, "127.0.0.1")
	caFile := ca.WriteCA(t, dir)
	secret := auth.GenerateControllerSecret()
	metricsAddr := freeAddr(t)
	httpAddr, grpcAddr := startServer(t, ServerConfig{
		DBDriver: "sqlite", DBDSN: sqlstore.SQLiteDSN(filepath.Join(dir, "falcon.db")), Migrate: true,
		HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", ArtifactRoot: dir,
		Auth: AuthNone, ControllerSecret: secret,
		TLSCertFile: certFile, TLSKeyFile: keyFile, MetricsAddr: metricsAddr,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A controller checking another name is refused before it sends its
	// secret.
	err := Controller(ctx, ControllerConfig{Server: grpcAddr, DataDir: t.TempDir(), LocalCluster: "box",
		ControllerSecret: secret, APICAFile: caFile, APIServerName: "elsewhere.example"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("controller checking the wrong name: %v; want Unavailable naming the certificate", err)
	}
	// Plaintext gets nowhere.
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := falconv1.NewClusterServiceClient(conn).ListClusters(ctx, &falconv1.ListClustersRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext call to the TLS port: %v; want Unavailable", err)
	}

	cctx, ccancel := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() {
		cdone <- Controller(cctx, ControllerConfig{Server: grpcAddr, DataDir: t.TempDir(), LocalCluster: "box",
			ControllerSecret: secret, APICAFile: caFile, APIServerName: name, Interval: 100 * time.Millisecond})
	}()
	defer func() {
		ccancel()
		if err := <-cdone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("controller: %v", err)
		}
	}()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	serial := func() *big.Int {
		// A new connection each time, so each one handshakes.
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: name}, DisableKeepAlives: true}}
		resp, err := hc.Get("https://" + httpAddr + "/v1/clusters/box")
		if err != nil {
			t.Fatalf("HTTPS gateway: %v", err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
			t.Fatalf("HTTPS gateway: %s", resp.Status)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber
	}
	waitFor(t, 20*time.Second, "the controller registered its cluster through TLS", func() bool {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: name}}}
		code, _ := get(t, hc, "https://"+httpAddr+"/v1/clusters/box")
		return code == http.StatusOK
	})
	if got := serial(); got.Cmp(first) != 0 {
		t.Fatalf("gateway serves serial %v, want %v", got, first)
	}
	// Plain HTTP to the gateway is refused too.
	if resp, err := http.Get("http://" + httpAddr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS gateway: %s, want 400", resp.Status)
		}
	}

	// cert-manager renews the certificate: the next handshake serves it.
	_, _, second := ca.WriteServer(t, dir, name, "127.0.0.1")
	later := time.Now().Add(time.Minute)
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the renewed certificate is served", func() bool { return serial().Cmp(second) == 0 })

	// Probes and metrics, in clear on their own port.
	code, body := get(t, http.DefaultClient, "http://"+metricsAddr+"/readyz")
	if code != http.StatusOK || body != "ok: server\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	_, body = get(t, http.DefaultClient, "http://"+metricsAddr+"/metrics")
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="RegisterCluster",grpc_service="falcon.v1.ClusterService",grpc_type="unary"}`,
		`grpc_server_handling_seconds_bucket{grpc_method="GetCluster"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", d, what)
		}
	}
}

func TestServerRefusesBadTLSAndSchema(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	certFile, keyFile, _ := ca.WriteServer(t, dir, "localhost")
	other := t.TempDir()
	_, otherKey, _ := ca.WriteServer(t, other, "localhost")
	secret := auth.GenerateControllerSecret()
	ok := ServerConfig{Auth: AuthNone, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", ControllerSecret: secret, ArtifactRoot: dir,
		DBDriver: "sqlite", DBDSN: sqlstore.SQLiteDSN(filepath.Join(dir, "falcon.db"))}
	for _, tt := range []struct {
		name string
		edit func(*ServerConfig)
		want string
	}{
		{"plaintext gRPC on a public address", func(c *ServerConfig) {
			c.Auth, c.CFTeamDomain, c.CFAudience, c.GRPCAddr = AuthCloudflare, "myteam", "aud", "0.0.0.0:0"
		}, `--tls-cert-file: is required when --grpc-addr "0.0.0.0:0" is not loopback`},
		{"certificate without key", func(c *ServerConfig) { c.TLSCertFile = certFile }, "--tls-key-file: is required with --tls-cert-file"},
		{"missing certificate", func(c *ServerConfig) { c.TLSCertFile, c.TLSKeyFile = filepath.Join(dir, "none.crt"), keyFile }, "--tls-cert-file: cannot read"},
		{"key of another certificate", func(c *ServerConfig) { c.TLSCertFile, c.TLSKeyFile = certFile, otherKey }, "do not form a certificate and its key"},
		{"schema behind", func(c *ServerConfig) {}, "--migrate: the database schema is at version 0 and this server needs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			err := Server(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("Server = %v, want an InvalidArgument error containing %q", err, tt.want)
			}
		})
	}
}

// TestServerWaitsForTeamKeys: a team whose keys cannot be fetched at start
// leaves the server up but not ready, saying why, and it keeps trying; once
// the keys come, it is ready.
func TestServerWaitsForTeamKeys(t *testing.T) {
	saved := keyRetry
	keyRetry.first, keyRetry.max = 20*time.Millisecond, 50*time.Millisecond
	defer func() { keyRetry = saved }()
	var up atomic.Bool
	var fetches atomic.Int64
	team := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if r.URL.Path != auth.CertsPath || !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}`)
	}))
	defer team.Close()
	dir := t.TempDir()
	metricsAddr := freeAddr(t)
	startServer(t, ServerConfig{
		DBDriver: "sqlite", DBDSN: sqlstore.SQLiteDSN(filepath.Join(dir, "falcon.db")), Migrate: true,
		HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", ArtifactRoot: dir, ControllerSecret: auth.GenerateControllerSecret(),
		Auth: AuthCloudflare, CFTeamDomain: team.URL, CFAudience: "aud", MetricsAddr: metricsAddr,
	})
	var body string
	waitFor(t, 10*time.Second, "/readyz says why it is not ready", func() bool {
		var code int
		code, body = get(t, http.DefaultClient, "http://"+metricsAddr+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "--cf-team-domain") && strings.Contains(body, "503")
	})
	before := fetches.Load()
	waitFor(t, 10*time.Second, "it keeps trying", func() bool { return fetches.Load() >= before+2 })
	up.Store(true)
	waitFor(t, 10*time.Second, "/readyz is ok once the keys came", func() bool {
		code, _ := get(t, http.DefaultClient, "http://"+metricsAddr+"/readyz")
		return code == http.StatusOK
	})
}
