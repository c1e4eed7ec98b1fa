package stack

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store/sqlstore"
)

func TestServerRefusesUnsafeConfig(t *testing.T) {
	secret := auth.GenerateControllerSecret()
	ok := ServerConfig{Auth: AuthNone, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", ControllerSecret: secret, ArtifactRoot: t.TempDir()}
	tests := []struct {
		name string
		edit func(*ServerConfig)
		want string
	}{
		{"auth none on a public address", func(c *ServerConfig) { c.HTTPAddr = "0.0.0.0:8080" }, "--http-addr: \"0.0.0.0:8080\" is not loopback: falcon server --auth none has no authentication"},
		{"unknown auth", func(c *ServerConfig) { c.Auth = "ldap" }, `--auth: "ldap" is not supported`},
		{"cloudflare without team", func(c *ServerConfig) { c.Auth, c.CFAudience = AuthCloudflare, "aud" }, "--cf-team-domain"},
		{"cloudflare without audience", func(c *ServerConfig) { c.Auth, c.CFTeamDomain = AuthCloudflare, "myteam" }, "--cf-audience: is required"},
		{"no artifact root", func(c *ServerConfig) { c.ArtifactRoot = "" }, "--artifact-root: is required"},
		{"artifact root of another store", func(c *ServerConfig) { c.ArtifactRoot = "s3://bucket" }, "--artifact-root: \"s3://bucket\": the scheme must be gs:// or file://"},
		{"no controller secret", func(c *ServerConfig) { c.ControllerSecret = "" }, "--controller-token-file: is required"},
		{"weak controller secret", func(c *ServerConfig) { c.ControllerSecret = "secret" }, "at least"},
		{"negative results interval", func(c *ServerConfig) { c.ResultsEvery = -time.Second }, "--results-interval: must be a positive duration such as 15s, got -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			err := Server(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Server = %v, want an error containing %q", err, tt.want)
			}
			if strings.HasPrefix(tt.want, "--") && !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("flag error %v is not ErrInvalid (exit 2)", err)
			}
		})
	}
}

// `falcon server` and `falcon controller` as a deployment runs them: the
// controller's secret admits it, and a wrong one is refused.
func TestServerAndControllerShareASecret(t *testing.T) {
	dir := t.TempDir()
	secret := auth.GenerateControllerSecret()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Server(ctx, ServerConfig{
			DBDriver: "sqlite", DBDSN: sqlstore.SQLiteDSN(filepath.Join(dir, "falcon.db")), Migrate: true,
			HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", ArtifactRoot: dir,
			Auth: AuthNone, ControllerSecret: secret,
			Ready: func(h, g string) { ready <- [2]string{h, g} },
		})
	}()
	var addrs [2]string
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("server did not start")
	}

	err := Controller(ctx, ControllerConfig{Server: addrs[1], DataDir: t.TempDir(), LocalCluster: "box",
		ControllerSecret: auth.GenerateControllerSecret()})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "invalid controller token") {
		t.Fatalf("controller with the wrong secret: %v", err)
	}

	cctx, ccancel := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() {
		cdone <- Controller(cctx, ControllerConfig{Server: addrs[1], DataDir: t.TempDir(), LocalCluster: "box",
			ControllerSecret: secret, Interval: 100 * time.Millisecond})
	}()
	c, err := client.New("http://" + addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := c.GetCluster(ctx, &falconv1.GetClusterRequest{Name: "box"}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the controller did not register its cluster")
		}
	}
	// The server's user (auth none) may not act as a controller.
	conn, err := grpc.NewClient(addrs[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = falconv1.NewJobServiceClient(conn).UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: "job-0000000000", ExpectedStatus: "Pending", Status: "Running"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a user calling UpdateJobStatus: %v; want PermissionDenied", err)
	}
	ccancel()
	if err := <-cdone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("controller: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("server: %v", err)
	}
}

// `falcon dev` needs no login, and its in-process controllers still get
// through: an experiment runs to the end.
func TestDevRunsWithoutLogin(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Dev(ctx, DevConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
			Interval: 200 * time.Millisecond, Ready: func(h, _ string) { ready <- h }})
	}()
	var httpAddr string
	select {
	case httpAddr = <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("dev did not start")
	}
	c, err := client.New("http://" + httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := c.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "dev-ok", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: exp.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetStatus() == "Succeeded" {
			break
		}
		if time.Now().After(deadline) || got.GetStatus() == "Failed" {
			t.Fatalf("experiment is %s/%s: %s", got.GetStatus(), got.GetReason(), got.GetMessage())
		}
	}
	resp, err := http.Get("http://" + httpAddr + "/healthz")
	if err == nil {
		resp.Body.Close()
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("dev: %v", err)
	}
}
