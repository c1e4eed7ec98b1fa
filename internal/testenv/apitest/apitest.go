// Package apitest starts a real Falcon API server for tests: SQLite in a temp
// dir, gRPC and HTTP on loopback ports, and a gRPC client connection, so
// controller tests exercise the same wire path as production.
package apitest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
)

// Env is a running API server.
type Env struct {
	Store    *sqlstore.Store
	Conn     *grpc.ClientConn
	Dir      string
	HTTPAddr string
	Exps     falconv1.ExperimentServiceClient
	Jobs     falconv1.JobServiceClient
	Arts     falconv1.ArtifactServiceClient
}

// Start serves an API server until the test ends. clusters are registered
// (name -> backend) before it serves.
func Start(t testing.TB, clusters map[string]string, opts ...apiserver.Option) *Env {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "falcon.db")))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for name, backend := range clusters {
		if _, err := st.UpsertCluster(ctx, &store.Cluster{ID: ids.New(ids.Cluster), Name: name, Backend: backend, Status: store.ClusterActive, CreatedAt: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	opts = append([]apiserver.Option{apiserver.WithArtifactRoot(dir), apiserver.WithLogDir(filepath.Join(dir, "logs"))}, opts...)
	running, err := apiserver.New(st, opts...).Serve(ctx, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(running.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		_ = running.Wait()
		st.Close()
	})
	return &Env{
		Store: st, Conn: conn, Dir: dir, HTTPAddr: running.HTTPAddr,
		Exps: falconv1.NewExperimentServiceClient(conn),
		Jobs: falconv1.NewJobServiceClient(conn),
		Arts: falconv1.NewArtifactServiceClient(conn),
	}
}

// Create creates an experiment with the given roles (role -> task spec).
func (e *Env) Create(t testing.TB, name string, roles map[string]*falconv1.TaskSpec) *falconv1.Experiment {
	t.Helper()
	exp, err := e.Exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: name, Config: "cfg-" + name, RoleToTaskSpec: roles,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// Job reads a job.
func (e *Env) Job(t testing.TB, id string) *falconv1.Job {
	t.Helper()
	j, err := e.Jobs.GetJob(context.Background(), &falconv1.GetJobRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// Exp reads an experiment with its jobs and artifact.
func (e *Env) Exp(t testing.TB, id string) *falconv1.Experiment {
	t.Helper()
	x, err := e.Exps.GetExp(context.Background(), &falconv1.GetExpRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return x
}
