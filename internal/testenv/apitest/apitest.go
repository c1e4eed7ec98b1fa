// Package apitest starts a real Falcon API server for tests: SQLite in a temp
// dir (or a store the test brings, e.g. MariaDB), gRPC and HTTP on loopback
// ports, and gRPC client connections, so controller tests exercise the same
// wire path as production, credentials included: Conn presents the
// controller secret as a controller does, UserConn is a user's.
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
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
)

// Env is a running API server.
type Env struct {
	Store *sqlstore.Store
	// Conn carries the controller secret, like a controller's connection:
	// hand it to the controllers under test.
	Conn *grpc.ClientConn
	// UserConn carries no credential; with the default authenticator its
	// calls are the local OS user's.
	UserConn         *grpc.ClientConn
	ControllerSecret string
	Dir              string
	HTTPAddr         string
	GRPCAddr         string
	// Exps is the user's (creating and aborting experiments); Jobs and
	// Arts are the controller's (status updates are internal methods).
	Exps falconv1.ExperimentServiceClient
	Jobs falconv1.JobServiceClient
	Arts falconv1.ArtifactServiceClient
}

// Options configure StartWith.
type Options struct {
	// Clusters are registered (name -> backend) before the server serves.
	Clusters map[string]string
	// Store is the server's store; nil means a new SQLite file in a temp dir.
	Store *sqlstore.Store
	// Server are extra server options, applied last.
	Server []apiserver.Option
}

// Start serves an API server until the test ends. clusters are registered
// (name -> backend) before it serves.
func Start(t testing.TB, clusters map[string]string, opts ...apiserver.Option) *Env {
	t.Helper()
	return StartWith(t, Options{Clusters: clusters, Server: opts})
}

// StartWith serves an API server configured by o until the test ends.
func StartWith(t testing.TB, o Options) *Env {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	st := o.Store
	if st == nil {
		var err error
		if st, err = sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "falcon.db"))); err != nil {
			t.Fatal(err)
		}
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, backend := range o.Clusters {
		if _, err := st.UpsertCluster(ctx, &store.Cluster{ID: ids.New(ids.Cluster), Name: name, Backend: backend, Status: store.ClusterActive, CreatedAt: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	secret := auth.GenerateControllerSecret()
	cs, err := auth.NewControllerSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	root, err := blobstore.Parse("dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]apiserver.Option{
		apiserver.WithArtifactRoot(root), apiserver.WithLogDir(filepath.Join(dir, "logs")),
		apiserver.WithControllerSecret(cs),
	}, o.Server...)
	running, err := apiserver.New(st, opts...).Serve(ctx, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = running.Wait()
		if o.Store == nil {
			st.Close()
		}
	})
	e := &Env{Store: st, ControllerSecret: secret, Dir: dir, HTTPAddr: running.HTTPAddr, GRPCAddr: running.GRPCAddr}
	// Dialled after the cleanup above, so the connections close first (and
	// the server need not wait for their streams).
	e.Conn = e.Dial(t, grpc.WithPerRPCCredentials(auth.ControllerCredentials(secret)))
	e.UserConn = e.Dial(t)
	e.Exps = falconv1.NewExperimentServiceClient(e.UserConn)
	e.Jobs = falconv1.NewJobServiceClient(e.Conn)
	e.Arts = falconv1.NewArtifactServiceClient(e.Conn)
	return e
}

// Dial opens another connection to the server's gRPC port, closed when the
// test ends; opts add credentials.
func (e *Env) Dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(e.GRPCAddr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
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
