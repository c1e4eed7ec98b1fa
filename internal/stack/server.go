package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/provider/local"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// ServerConfig configures `falcon server`.
type ServerConfig struct {
	DBDriver     string // "mysql" or "sqlite"
	DBDSN        string
	Migrate      bool // apply migrations before serving
	HTTPAddr     string
	GRPCAddr     string
	ArtifactRoot string // gs://bucket, or a directory
	LogDir       string
	Log          *slog.Logger
}

// Server runs the API server until ctx is done.
func Server(ctx context.Context, cfg ServerConfig) error {
	log := orDiscard(cfg.Log)
	st, err := OpenStore(ctx, cfg.DBDriver, cfg.DBDSN, cfg.Migrate)
	if err != nil {
		return err
	}
	defer st.Close()
	srv := apiserver.New(st, apiserver.WithLogger(log),
		apiserver.WithArtifactRoot(cfg.ArtifactRoot), apiserver.WithLogDir(cfg.LogDir))
	running, err := srv.Serve(ctx, cfg.GRPCAddr, cfg.HTTPAddr)
	if err != nil {
		return err
	}
	log.Info("falcon server serving", "http", running.HTTPAddr, "grpc", running.GRPCAddr)
	return running.Wait()
}

// Migrate applies the store's migrations.
func Migrate(ctx context.Context, driver, dsn string) error {
	st, err := OpenStore(ctx, driver, dsn, true)
	if err != nil {
		return err
	}
	return st.Close()
}

// ControllerConfig configures `falcon controller`.
type ControllerConfig struct {
	Server   string // the API server's gRPC address
	DataDir  string // for the local backend
	Interval time.Duration
	// LocalCluster, if set, registers a cluster of that name whose jobs run
	// as processes on this controller's machine.
	LocalCluster string
	Log          *slog.Logger
}

// Controller runs the expController and the resource manager against an API
// server until ctx is done.
func Controller(ctx context.Context, cfg ControllerConfig) error {
	log := orDiscard(cfg.Log)
	if cfg.Server == "" {
		return errors.New("the API server's gRPC address is required")
	}
	conn, err := dial(cfg.Server)
	if err != nil {
		return err
	}
	defer conn.Close()
	if cfg.LocalCluster != "" {
		if _, err := falconv1.NewClusterServiceClient(conn).RegisterCluster(ctx, &falconv1.RegisterClusterRequest{
			Cluster: &falconv1.Cluster{Name: cfg.LocalCluster, Backend: local.BackendName, Location: "localhost"},
		}); err != nil {
			return fmt.Errorf("register local cluster %s: %w", cfg.LocalCluster, err)
		}
	}
	var mgr *resourcemanager.Manager
	exec, err := local.New(cfg.DataDir, local.WithLogger(log), local.WithOnExit(func(string) {
		if mgr != nil {
			mgr.Wake()
		}
	}))
	if err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	if _, err := exec.Recover(ctx); err != nil {
		return err
	}
	interval := cfg.Interval
	if interval == 0 {
		interval = 5 * time.Second
	}
	kb := kube.New(kube.WithLogger(log), kube.WithOnChange(func() {
		if mgr != nil {
			mgr.Wake()
		}
	}))
	defer kb.Close()
	mgr = resourcemanager.New(conn, resourcemanager.WithLogger(log), resourcemanager.WithInterval(interval),
		resourcemanager.WithBackend(local.BackendName, local.NewBackend(exec)),
		resourcemanager.WithBackend(kube.BackendName, kb))
	ec := expctl.New(conn, expctl.WithLogger(log), expctl.WithInterval(interval))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Run(gctx) })
	g.Go(func() error { return ec.Run(gctx) })
	err = g.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = exec.Shutdown(sctx)
	return err
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}
