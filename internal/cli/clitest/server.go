package clitest

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// API implements every Falcon service. Set the ...Func fields a test needs;
// a method whose func is nil answers Unimplemented. Every call is recorded.
type API struct {
	falconv1.UnimplementedExperimentServiceServer
	falconv1.UnimplementedJobServiceServer
	falconv1.UnimplementedArtifactServiceServer
	falconv1.UnimplementedClusterServiceServer
	falconv1.UnimplementedUserServiceServer

	CreateExpFunc        func(context.Context, *falconv1.CreateExpRequest) (*falconv1.Experiment, error)
	GetExpFunc           func(context.Context, *falconv1.GetExpRequest) (*falconv1.Experiment, error)
	ListExpsFunc         func(context.Context, *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error)
	AbortExpFunc         func(context.Context, *falconv1.AbortExpRequest) (*falconv1.AbortExpResponse, error)
	DeleteExpFunc        func(context.Context, *falconv1.DeleteExpRequest) (*falconv1.DeleteExpResponse, error)
	GetExpLogsFunc       func(*falconv1.GetExpLogsRequest, grpc.ServerStreamingServer[falconv1.LogLines]) error
	WatchExpFunc         func(*falconv1.WatchExpRequest, grpc.ServerStreamingServer[falconv1.ExpEvent]) error
	GetJobFunc           func(context.Context, *falconv1.GetJobRequest) (*falconv1.Job, error)
	ListJobsFunc         func(context.Context, *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error)
	GetArtifactFunc      func(context.Context, *falconv1.GetArtifactRequest) (*falconv1.Artifact, error)
	ListArtifactsFunc    func(context.Context, *falconv1.ListArtifactsRequest) (*falconv1.ListArtifactsResponse, error)
	GetClusterFunc       func(context.Context, *falconv1.GetClusterRequest) (*falconv1.Cluster, error)
	ListClustersFunc     func(context.Context, *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error)
	RegisterClusterFunc  func(context.Context, *falconv1.RegisterClusterRequest) (*falconv1.Cluster, error)
	ApplyClustersFunc    func(context.Context, *falconv1.ApplyClustersRequest) (*falconv1.ApplyClustersResponse, error)
	SetClusterStatusFunc func(context.Context, *falconv1.SetClusterStatusRequest) (*falconv1.Cluster, error)
	GetCurrentUserFunc   func(context.Context, *falconv1.GetCurrentUserRequest) (*falconv1.User, error)

	mu    sync.Mutex
	calls []Call
}

var (
	_ falconv1.ExperimentServiceServer = (*API)(nil)
	_ falconv1.JobServiceServer        = (*API)(nil)
	_ falconv1.ArtifactServiceServer   = (*API)(nil)
	_ falconv1.ClusterServiceServer    = (*API)(nil)
	_ falconv1.UserServiceServer       = (*API)(nil)
)

// Call is one recorded RPC.
type Call struct {
	Method  string
	Request proto.Message
}

// Calls returns the recorded calls in order.
func (a *API) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Call(nil), a.calls...)
}

// Requests returns the requests of the calls to method, in order.
func (a *API) Requests(method string) []proto.Message {
	var out []proto.Message
	for _, c := range a.Calls() {
		if c.Method == method {
			out = append(out, c.Request)
		}
	}
	return out
}

func unary[Req proto.Message, Resp any](a *API, method string, fn func(context.Context, Req) (Resp, error), ctx context.Context, req Req) (Resp, error) {
	a.mu.Lock()
	a.calls = append(a.calls, Call{Method: method, Request: proto.Clone(req)})
	a.mu.Unlock()
	if fn == nil {
		var zero Resp
		return zero, status.Errorf(codes.Unimplemented, "%s is not scripted in this test", method)
	}
	return fn(ctx, req)
}

func (a *API) CreateExp(ctx context.Context, r *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
	return unary(a, "CreateExp", a.CreateExpFunc, ctx, r)
}
func (a *API) GetExp(ctx context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
	return unary(a, "GetExp", a.GetExpFunc, ctx, r)
}
func (a *API) ListExps(ctx context.Context, r *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
	return unary(a, "ListExps", a.ListExpsFunc, ctx, r)
}
func (a *API) AbortExp(ctx context.Context, r *falconv1.AbortExpRequest) (*falconv1.AbortExpResponse, error) {
	return unary(a, "AbortExp", a.AbortExpFunc, ctx, r)
}
func (a *API) DeleteExp(ctx context.Context, r *falconv1.DeleteExpRequest) (*falconv1.DeleteExpResponse, error) {
	return unary(a, "DeleteExp", a.DeleteExpFunc, ctx, r)
}
func (a *API) GetJob(ctx context.Context, r *falconv1.GetJobRequest) (*falconv1.Job, error) {
	return unary(a, "GetJob", a.GetJobFunc, ctx, r)
}
func (a *API) ListJobs(ctx context.Context, r *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
	return unary(a, "ListJobs", a.ListJobsFunc, ctx, r)
}
func (a *API) GetArtifact(ctx context.Context, r *falconv1.GetArtifactRequest) (*falconv1.Artifact, error) {
	return unary(a, "GetArtifact", a.GetArtifactFunc, ctx, r)
}
func (a *API) ListArtifacts(ctx context.Context, r *falconv1.ListArtifactsRequest) (*falconv1.ListArtifactsResponse, error) {
	return unary(a, "ListArtifacts", a.ListArtifactsFunc, ctx, r)
}
func (a *API) GetCluster(ctx context.Context, r *falconv1.GetClusterRequest) (*falconv1.Cluster, error) {
	return unary(a, "GetCluster", a.GetClusterFunc, ctx, r)
}
func (a *API) ListClusters(ctx context.Context, r *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
	return unary(a, "ListClusters", a.ListClustersFunc, ctx, r)
}
func (a *API) RegisterCluster(ctx context.Context, r *falconv1.RegisterClusterRequest) (*falconv1.Cluster, error) {
	return unary(a, "RegisterCluster", a.RegisterClusterFunc, ctx, r)
}
func (a *API) ApplyClusters(ctx context.Context, r *falconv1.ApplyClustersRequest) (*falconv1.ApplyClustersResponse, error) {
	return unary(a, "ApplyClusters", a.ApplyClustersFunc, ctx, r)
}
func (a *API) SetClusterStatus(ctx context.Context, r *falconv1.SetClusterStatusRequest) (*falconv1.Cluster, error) {
	return unary(a, "SetClusterStatus", a.SetClusterStatusFunc, ctx, r)
}
func (a *API) GetCurrentUser(ctx context.Context, r *falconv1.GetCurrentUserRequest) (*falconv1.User, error) {
	return unary(a, "GetCurrentUser", a.GetCurrentUserFunc, ctx, r)
}

func (a *API) GetExpLogs(r *falconv1.GetExpLogsRequest, stream grpc.ServerStreamingServer[falconv1.LogLines]) error {
	a.mu.Lock()
	a.calls = append(a.calls, Call{Method: "GetExpLogs", Request: proto.Clone(r)})
	a.mu.Unlock()
	if a.GetExpLogsFunc == nil {
		return status.Error(codes.Unimplemented, "GetExpLogs is not scripted in this test")
	}
	return a.GetExpLogsFunc(r, stream)
}

func (a *API) WatchExp(r *falconv1.WatchExpRequest, stream grpc.ServerStreamingServer[falconv1.ExpEvent]) error {
	a.mu.Lock()
	a.calls = append(a.calls, Call{Method: "WatchExp", Request: proto.Clone(r)})
	a.mu.Unlock()
	if a.WatchExpFunc == nil {
		return status.Error(codes.Unimplemented, "WatchExp is not scripted in this test")
	}
	return a.WatchExpFunc(r, stream)
}

// GatewayMarshaler is the marshaler the real server's gateway uses.
var GatewayMarshaler = &runtime.JSONPb{
	MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
	UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
}

// Start serves api on loopback and returns the gateway's base URL. Both
// servers stop when the test ends.
func Start(t testing.TB, api *API) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	falconv1.RegisterExperimentServiceServer(gs, api)
	falconv1.RegisterJobServiceServer(gs, api)
	falconv1.RegisterArtifactServiceServer(gs, api)
	falconv1.RegisterClusterServiceServer(gs, api)
	falconv1.RegisterUserServiceServer(gs, api)
	go gs.Serve(lis) //nolint:errcheck // ends with Stop below

	ctx, cancel := context.WithCancel(context.Background())
	mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, GatewayMarshaler))
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	endpoint := lis.Addr().String()
	for _, register := range []func(context.Context, *runtime.ServeMux, string, []grpc.DialOption) error{
		falconv1.RegisterExperimentServiceHandlerFromEndpoint,
		falconv1.RegisterJobServiceHandlerFromEndpoint,
		falconv1.RegisterArtifactServiceHandlerFromEndpoint,
		falconv1.RegisterClusterServiceHandlerFromEndpoint,
		falconv1.RegisterUserServiceHandlerFromEndpoint,
	} {
		if err := register(ctx, mux, endpoint, opts); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		gs.Stop()
	})
	return hs.URL
}

// DownURL returns the URL of a loopback port nothing listens on.
func DownURL(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return "http://" + addr
}

// Now is the fixed clock of CLI tests.
var Now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Streams are the buffers behind a test Factory's IOStreams.
type Streams struct {
	IO              *iostreams.IOStreams
	In, Out, ErrOut *bytes.Buffer
}

// NewFactory returns a Factory talking to serverURL with buffered streams,
// the given output format, the fixed clock Now, an empty environment and a
// credentials file in a temp dir.
func NewFactory(t testing.TB, serverURL string, format output.Format) (*factory.Factory, *Streams) {
	t.Helper()
	ios, in, out, errOut := iostreams.Test()
	c, err := client.New(serverURL, client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := &credentials.Store{Path: filepath.Join(t.TempDir(), credentials.FileName)}
	f := &factory.Factory{
		IOStreams:    ios,
		Client:       func() (*client.Client, error) { return c, nil },
		Server:       func() (string, error) { return c.Server(), nil },
		Credentials:  func() (*credentials.Store, error) { return store, nil },
		OutputFormat: func() output.Format { return format },
		Now:          func() time.Time { return Now },
	}
	return f, &Streams{IO: ios, In: in, Out: out, ErrOut: errOut}
}
