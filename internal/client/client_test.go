package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/client"
)

func newClient(t *testing.T, api *clitest.API, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(clitest.Start(t, api), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNew(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "http://127.0.0.1:7070", want: "http://127.0.0.1:7070"},
		{in: "http://127.0.0.1:7070/", want: "http://127.0.0.1:7070"},
		{in: "127.0.0.1:7070", want: "http://127.0.0.1:7070"},
		{in: "https://falcon.example.com/api/", want: "https://falcon.example.com/api"},
		{in: "", wantErr: true},
		{in: "ftp://x", wantErr: true},
		{in: "http://", wantErr: true},
	}
	for _, tt := range tests {
		c, err := client.New(tt.in)
		if tt.wantErr {
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("New(%q) error = %v, want InvalidArgument", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q): %v", tt.in, err)
			continue
		}
		if got := c.Server(); got != tt.want {
			t.Errorf("New(%q).Server() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUnaryRoundTrips(t *testing.T) {
	created := timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	exp := &falconv1.Experiment{
		Id: "exp-q7odgo8q9x", Name: "bench", ExpType: "benchmark", Status: "Running", CreatedAt: created,
		RoleToTaskSpec: map[string]*falconv1.TaskSpec{"worker": {Command: "run", Replica: 2, Envs: map[string]string{"A": "1"}}},
		Jobs:           []*falconv1.Job{{Id: "job-ki5t2jegpi", Role: "worker", Status: "Running"}},
		Artifact:       &falconv1.Artifact{Id: "art-1t44htxy4y", Status: "Created"},
	}
	api := &clitest.API{
		CreateExpFunc: func(_ context.Context, r *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
			out := proto.Clone(r.GetExperiment()).(*falconv1.Experiment)
			out.Id = "exp-q7odgo8q9x"
			return out, nil
		},
		GetExpFunc: func(context.Context, *falconv1.GetExpRequest) (*falconv1.Experiment, error) { return exp, nil },
		ListExpsFunc: func(context.Context, *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
			return &falconv1.ListExpsResponse{Items: []*falconv1.Experiment{exp}, NextPageToken: "t2"}, nil
		},
		AbortExpFunc: func(context.Context, *falconv1.AbortExpRequest) (*falconv1.AbortExpResponse, error) {
			return &falconv1.AbortExpResponse{Changed: true}, nil
		},
		DeleteExpFunc: func(_ context.Context, r *falconv1.DeleteExpRequest) (*falconv1.DeleteExpResponse, error) {
			return &falconv1.DeleteExpResponse{Id: r.GetId()}, nil
		},
		GetJobFunc: func(_ context.Context, r *falconv1.GetJobRequest) (*falconv1.Job, error) {
			return &falconv1.Job{Id: r.GetId()}, nil
		},
		ListJobsFunc: func(context.Context, *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
			return &falconv1.ListJobsResponse{}, nil
		},
		GetArtifactFunc: func(_ context.Context, r *falconv1.GetArtifactRequest) (*falconv1.Artifact, error) {
			return &falconv1.Artifact{Id: r.GetId()}, nil
		},
		ListArtifactsFunc: func(context.Context, *falconv1.ListArtifactsRequest) (*falconv1.ListArtifactsResponse, error) {
			return &falconv1.ListArtifactsResponse{}, nil
		},
		GetClusterFunc: func(_ context.Context, r *falconv1.GetClusterRequest) (*falconv1.Cluster, error) {
			return &falconv1.Cluster{Name: r.GetName()}, nil
		},
		ListClustersFunc: func(context.Context, *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
			return &falconv1.ListClustersResponse{}, nil
		},
		GetCurrentUserFunc: func(context.Context, *falconv1.GetCurrentUserRequest) (*falconv1.User, error) {
			return &falconv1.User{UserId: "u-1"}, nil
		},
	}
	c := newClient(t, api)
	ctx := context.Background()

	createReq := &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{Name: "bench", Config: "a: 1\n", Tags: []string{"x"}}, ValidateOnly: true}
	got, err := c.CreateExp(ctx, createReq)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetId() != "exp-q7odgo8q9x" || got.GetConfig() != "a: 1\n" {
		t.Errorf("CreateExp = %v", got)
	}
	gotExp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: exp.Id})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(exp, gotExp, protocmp.Transform()); diff != "" {
		t.Errorf("GetExp (-want +got):\n%s", diff)
	}
	listReq := &falconv1.ListExpsRequest{PageSize: 10, PageToken: "t1", ClusterName: "c", Status: "Running", ExpType: "benchmark", Creator: "alice"}
	list, err := c.ListExps(ctx, listReq)
	if err != nil || list.GetNextPageToken() != "t2" || len(list.GetItems()) != 1 {
		t.Errorf("ListExps = %v, %v", list, err)
	}
	abortReq := &falconv1.AbortExpRequest{Id: "exp-q7odgo8q9x", Reason: "wrong image"}
	if r, err := c.AbortExp(ctx, abortReq); err != nil || !r.GetChanged() {
		t.Errorf("AbortExp = %v, %v", r, err)
	}
	if r, err := c.DeleteExp(ctx, &falconv1.DeleteExpRequest{Id: "exp-q7odgo8q9x"}); err != nil || r.GetId() != "exp-q7odgo8q9x" {
		t.Errorf("DeleteExp = %v, %v", r, err)
	}
	if r, err := c.GetJob(ctx, &falconv1.GetJobRequest{Id: "job-ki5t2jegpi"}); err != nil || r.GetId() != "job-ki5t2jegpi" {
		t.Errorf("GetJob = %v, %v", r, err)
	}
	jobsReq := &falconv1.ListJobsRequest{ExpId: "exp-q7odgo8q9x", Statuses: []string{"Pending", "Running"}, ClusterName: "c", PageSize: 5, PageToken: "p"}
	if _, err := c.ListJobs(ctx, jobsReq); err != nil {
		t.Errorf("ListJobs: %v", err)
	}
	if r, err := c.GetArtifact(ctx, &falconv1.GetArtifactRequest{Id: "art-1t44htxy4y"}); err != nil || r.GetId() != "art-1t44htxy4y" {
		t.Errorf("GetArtifact = %v, %v", r, err)
	}
	artsReq := &falconv1.ListArtifactsRequest{ExpId: "exp-q7odgo8q9x", Statuses: []string{"Failed"}, PageSize: 3}
	if _, err := c.ListArtifacts(ctx, artsReq); err != nil {
		t.Errorf("ListArtifacts: %v", err)
	}
	if r, err := c.GetCluster(ctx, &falconv1.GetClusterRequest{Name: "v7x-east"}); err != nil || r.GetName() != "v7x-east" {
		t.Errorf("GetCluster = %v, %v", r, err)
	}
	if _, err := c.ListClusters(ctx, &falconv1.ListClustersRequest{}); err != nil {
		t.Errorf("ListClusters: %v", err)
	}
	if r, err := c.GetCurrentUser(ctx, &falconv1.GetCurrentUserRequest{}); err != nil || r.GetUserId() != "u-1" {
		t.Errorf("GetCurrentUser = %v, %v", r, err)
	}

	// What the server received is what the client was asked to send: the
	// query parameter and body names match the gateway's.
	wantReqs := map[string]proto.Message{
		"CreateExp":     createReq,
		"ListExps":      listReq,
		"AbortExp":      abortReq,
		"ListJobs":      jobsReq,
		"ListArtifacts": artsReq,
	}
	for method, want := range wantReqs {
		reqs := api.Requests(method)
		if len(reqs) != 1 {
			t.Errorf("%s called %d times", method, len(reqs))
			continue
		}
		if diff := cmp.Diff(want, reqs[0], protocmp.Transform()); diff != "" {
			t.Errorf("%s request (-want +got):\n%s", method, diff)
		}
	}
}

func TestServerErrorsBecomeStatuses(t *testing.T) {
	badRequest, _ := status.New(codes.InvalidArgument, "name: required").WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "name", Description: "required"}},
	})
	api := &clitest.API{
		GetExpFunc: func(_ context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
			return nil, status.Errorf(codes.NotFound, "experiment %q not found", r.GetId())
		},
		CreateExpFunc: func(context.Context, *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
			return nil, badRequest.Err()
		},
	}
	c := newClient(t, api)
	_, err := c.GetExp(context.Background(), &falconv1.GetExpRequest{Id: "exp-0000000000"})
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != `experiment "exp-0000000000" not found` {
		t.Errorf("GetExp error = %v, want NotFound with the server's message", err)
	}
	_, err = c.CreateExp(context.Background(), &falconv1.CreateExpRequest{})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || st.Message() != "name: required" {
		t.Errorf("CreateExp error = %v", err)
	}
	if len(st.Details()) != 1 {
		t.Errorf("details = %v, want the BadRequest", st.Details())
	}
	// A method the test server does not script answers Unimplemented.
	if _, err := c.GetJob(context.Background(), &falconv1.GetJobRequest{Id: "j"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("GetJob error = %v, want Unimplemented", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	url := clitest.DownURL(t)
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetExp(context.Background(), &falconv1.GetExpRequest{Id: "x"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("error = %v, want Unavailable", err)
	}
	msg := status.Convert(err).Message()
	for _, want := range []string{url, "falcon dev", "--server", "FALCON_SERVER"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not mention %q", msg, want)
		}
	}
}

func TestTimeoutAndNonGatewayErrors(t *testing.T) {
	var gotAuth atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/v1/experiments/slow":
			time.Sleep(500 * time.Millisecond)
		case "/v1/experiments/proxy":
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>")
		case "/v1/experiments/teapot":
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, client.WithTimeout(50*time.Millisecond), client.WithToken(func(context.Context) (string, error) { return "tok", nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = c.GetExp(ctx, &falconv1.GetExpRequest{Id: "slow"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "50ms") {
		t.Errorf("slow: %v, want Unavailable (exit 6) naming the timeout", err)
	}
	if got := gotAuth.Load(); got != "Bearer tok" {
		t.Errorf("Authorization = %q, want the bearer token", got)
	}
	_, err = c.GetExp(ctx, &falconv1.GetExpRequest{Id: "proxy"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "bad gateway") {
		t.Errorf("proxy: %v, want Unavailable with the body", err)
	}
	_, err = c.GetExp(ctx, &falconv1.GetExpRequest{Id: "teapot"})
	if status.Code(err) != codes.Unknown {
		t.Errorf("teapot: %v, want Unknown", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.GetExp(cctx, &falconv1.GetExpRequest{Id: "x"}); status.Code(err) != codes.Canceled {
		t.Errorf("canceled: %v, want Canceled", err)
	}
	failing, _ := client.New(hs.URL, client.WithToken(func(context.Context) (string, error) { return "", errors.New("not logged in") }))
	if _, err := failing.GetExp(ctx, &falconv1.GetExpRequest{Id: "x"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("token error: %v, want Unauthenticated", err)
	}
}

func TestGetExpLogs(t *testing.T) {
	lines := []*falconv1.LogLine{
		{JobId: "job-1", Role: "worker", Rank: 0, Pod: "p0", Line: "hello"},
		{JobId: "job-1", Role: "worker", Rank: 1, Pod: "p1", Line: "world"},
	}
	api := &clitest.API{
		GetExpLogsFunc: func(r *falconv1.GetExpLogsRequest, s grpc.ServerStreamingServer[falconv1.LogLines]) error {
			switch r.GetId() {
			case "missing":
				return status.Error(codes.NotFound, "experiment \"missing\" not found")
			case "broken":
				if err := s.Send(&falconv1.LogLines{Lines: lines[:1]}); err != nil {
					return err
				}
				return status.Error(codes.Internal, "log backend went away")
			}
			for _, l := range lines {
				if err := s.Send(&falconv1.LogLines{Lines: []*falconv1.LogLine{l}}); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c := newClient(t, api, client.WithTimeout(time.Nanosecond)) // streams ignore the unary timeout
	ctx := context.Background()

	req := &falconv1.GetExpLogsRequest{Id: "exp-1", Role: "worker", Rank: proto.Int32(0), Tail: 10, Follow: true}
	s, err := c.GetExpLogs(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var got []*falconv1.LogLine
	for {
		l, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	s.Close()
	if diff := cmp.Diff(lines, got, protocmp.Transform()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(req, api.Requests("GetExpLogs")[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}

	// An error before any line.
	s, err = c.GetExpLogs(ctx, &falconv1.GetExpLogsRequest{Id: "missing"})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("missing: %v, want NotFound", err)
	}

	// An error in the middle of the stream.
	s, err = c.GetExpLogs(ctx, &falconv1.GetExpLogsRequest{Id: "broken"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if l, err := s.Recv(); err != nil || l.GetLine() != "hello" {
		t.Fatalf("first line = %v, %v", l, err)
	}
	_, err = s.Recv()
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "log backend went away") {
		t.Errorf("mid-stream error = %v, want the server's Internal status", err)
	}
}

// TestStreamsCut: the server ends every chunk with a newline, so a chunk
// that stops short of one was cut by the connection (Unavailable: the
// caller resumes) while a whole chunk that does not decode is a bad chunk
// (Internal), for events and logs alike.
func TestStreamsCut(t *testing.T) {
	const event, lines = `{"result":{"seq":"1"}}`, `{"result":{"lines":[{"line":"a"}]}}`
	tests := []struct {
		name, path, body string
		want             codes.Code // of the second Recv; OK: io.EOF
	}{
		{"events end", "events", event + "\n", codes.OK},
		{"events cut mid-chunk", "events", event + "\n" + `{"result":{"se`, codes.Unavailable},
		{"events bad chunk", "events", event + "\n" + `{"result":{"seq":true}}` + "\n", codes.Internal},
		{"events neither", "events", event + "\n" + `{}` + "\n", codes.Internal},
		{"events error chunk", "events", event + "\n" + `{"error":{"code":5,"message":"gone"}}` + "\n", codes.NotFound},
		{"logs end", "logs", lines + "\n", codes.OK},
		{"logs cut mid-chunk", "logs", lines + "\n" + `{"result":{"lines":[{"li`, codes.Unavailable},
		{"logs bad chunk", "logs", lines + "\n" + `{"result":{"lines":7}}` + "\n", codes.Internal},
		{"logs error chunk", "logs", lines + "\n" + `{"error":{"code":5,"message":"gone"}}` + "\n", codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/"+tt.path) {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			c, err := client.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var recv func() error
			if tt.path == "events" {
				s, err := c.WatchExp(ctx, &falconv1.WatchExpRequest{Id: "exp-1"})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				recv = func() error { _, err := s.Recv(); return err }
			} else {
				s, err := c.GetExpLogs(ctx, &falconv1.GetExpLogsRequest{Id: "exp-1"})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				recv = func() error { _, err := s.Recv(); return err }
			}
			if err := recv(); err != nil {
				t.Fatalf("first: %v", err)
			}
			err = recv()
			switch {
			case tt.want == codes.OK && !errors.Is(err, io.EOF):
				t.Errorf("second: %v, want io.EOF", err)
			case tt.want != codes.OK && status.Code(err) != tt.want:
				t.Errorf("second: %v, want %v", err, tt.want)
			}
			if again := recv(); !errors.Is(again, err) && again.Error() != err.Error() {
				t.Errorf("after the end: %v, want %v again", again, err)
			}
		})
	}
}
