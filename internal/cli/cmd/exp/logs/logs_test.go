package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

var allLines = []*falconv1.LogLine{
	{JobId: "job-main", Role: "main", Rank: 0, Pod: "main-0", Line: "main rank 0 of 1"},
	{JobId: "job-worker", Role: "worker", Rank: 0, Pod: "worker-0", Line: "worker rank 0 of 2"},
	{JobId: "job-worker", Role: "worker", Rank: 1, Pod: "worker-1", Line: "worker rank 1 of 2\n"},
}

// newAPI serves exp-two (roles main x1 and worker x2) and its log lines,
// filtered by role and rank like the real server.
func newAPI() *clitest.API {
	return &clitest.API{
		GetExpFunc: func(_ context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
			if r.GetId() != "exp-two" {
				return nil, status.Errorf(codes.NotFound, "experiment %q not found", r.GetId())
			}
			return &falconv1.Experiment{Id: "exp-two", RoleToTaskSpec: map[string]*falconv1.TaskSpec{
				"main":   {Replica: 1},
				"worker": {Replica: 2},
			}}, nil
		},
		GetExpLogsFunc: func(r *falconv1.GetExpLogsRequest, s grpc.ServerStreamingServer[falconv1.LogLines]) error {
			for _, l := range allLines {
				if (r.GetRole() != "" && l.GetRole() != r.GetRole()) || (r.Rank != nil && l.GetRank() != r.GetRank()) {
					continue
				}
				if err := s.Send(&falconv1.LogLines{Lines: []*falconv1.LogLine{l}}); err != nil {
					return err
				}
			}
			if r.GetFollow() {
				<-s.Context().Done()
			}
			return nil
		},
	}
}

func TestLogs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		format  output.Format
		want    string
		wantReq *falconv1.GetExpLogsRequest
	}{
		{
			name:    "several pods are prefixed with role/rank",
			args:    []string{"exp-two", "--tail", "100"},
			want:    "[main/0] main rank 0 of 1\n[worker/0] worker rank 0 of 2\n[worker/1] worker rank 1 of 2\n",
			wantReq: &falconv1.GetExpLogsRequest{Id: "exp-two", Tail: 100},
		},
		{
			name:    "one pod is not",
			args:    []string{"exp-two", "--role", "worker", "--rank", "1"},
			want:    "worker rank 1 of 2\n",
			wantReq: &falconv1.GetExpLogsRequest{Id: "exp-two", Role: "worker", Rank: proto.Int32(1)},
		},
		{
			name:    "rank 0 is sent, and of two roles still means two pods",
			args:    []string{"exp-two", "--rank", "0"},
			want:    "[main/0] main rank 0 of 1\n[worker/0] worker rank 0 of 2\n",
			wantReq: &falconv1.GetExpLogsRequest{Id: "exp-two", Rank: proto.Int32(0)},
		},
		{
			name:    "the only role with one replica",
			args:    []string{"exp-two", "--role", "main", "--container", "task"},
			want:    "main rank 0 of 1\n",
			wantReq: &falconv1.GetExpLogsRequest{Id: "exp-two", Role: "main"},
		},
		{
			name:    "json is one LogLine per line",
			args:    []string{"exp-two", "--role", "main"},
			format:  output.JSON,
			want:    `{"job_id":"job-main","role":"main","rank":0,"pod":"main-0","line":"main rank 0 of 1","time":null,"resume":""}` + "\n",
			wantReq: &falconv1.GetExpLogsRequest{Id: "exp-two", Role: "main"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newAPI()
			url := clitest.Start(t, api)
			format := tt.format
			if format == "" {
				format = output.Table
			}
			f, s := clitest.NewFactory(t, url, format)
			if err := clitest.Execute(NewCmdLogs(f, nil), tt.args...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, s.Out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantReq, api.Requests("GetExpLogs")[0], protocmp.Transform()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLogsErrors(t *testing.T) {
	url := clitest.Start(t, newAPI())
	tests := []struct {
		args []string
		code codes.Code
		want string
	}{
		{[]string{"exp-nope"}, codes.NotFound, `experiment "exp-nope" not found`},
		{[]string{"exp-two", "--container", "sidecar"}, codes.InvalidArgument, `--container: a job has only the container "task"`},
		{[]string{"exp-two", "--rank", "-1"}, codes.InvalidArgument, "--rank: must not be negative"},
		{[]string{"exp-two", "--tail", "-5"}, codes.InvalidArgument, "--tail: must not be negative"},
	}
	for _, tt := range tests {
		f, _ := clitest.NewFactory(t, url, output.Table)
		err := clitest.Execute(NewCmdLogs(f, nil), tt.args...)
		if errdefs.Code(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %v containing %q", tt.args, err, tt.code, tt.want)
		}
	}
}

// cancelOnWrite stops the command once it has printed something, as Ctrl-C
// would while following.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	defer w.cancel()
	return w.Buffer.Write(p)
}

func TestFollowEndsQuietlyWhenInterrupted(t *testing.T) {
	api := newAPI()
	url := clitest.Start(t, api)
	f, _ := clitest.NewFactory(t, url, output.JSON)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnWrite{cancel: cancel}
	opts := &Options{
		IO:      f.IOStreams,
		Client:  f.Client,
		Printer: func() *output.Printer { return output.New(out, nil, output.JSON, nil) },
		ID:      "exp-two",
		Role:    "main",
		Follow:  true,
	}
	if err := logsRun(ctx, opts); err != nil {
		t.Fatalf("interrupted follow returned %v, want nil", err)
	}
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line["line"] != "main rank 0 of 1" {
		t.Errorf("output = %q (%v)", out.String(), err)
	}
	if !api.Requests("GetExpLogs")[0].(*falconv1.GetExpLogsRequest).GetFollow() {
		t.Error("follow was not sent")
	}
}

// A followed stream that breaks (the server restarting) is opened again
// with the resume token of the last line printed: no line is lost or
// printed twice, and the person following is told.
func TestFollowResumesAfterABrokenStream(t *testing.T) {
	api := newAPI()
	mk := func(i int) *falconv1.LogLine {
		return &falconv1.LogLine{JobId: "job-main", Role: "main", Pod: "main-0", Line: fmt.Sprintf("line %d", i), Resume: fmt.Sprintf("tok-%d", i)}
	}
	var calls atomic.Int32
	api.GetExpLogsFunc = func(r *falconv1.GetExpLogsRequest, s grpc.ServerStreamingServer[falconv1.LogLines]) error {
		switch calls.Add(1) {
		case 1:
			if r.GetResume() != "" || r.GetTail() != 5 {
				return status.Errorf(codes.InvalidArgument, "first request: resume %q tail %d", r.GetResume(), r.GetTail())
			}
			if err := s.Send(&falconv1.LogLines{Lines: []*falconv1.LogLine{mk(1), mk(2), mk(3)}}); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "server shutting down")
		case 2:
			if r.GetResume() != "tok-3" || r.GetTail() != 0 {
				return status.Errorf(codes.InvalidArgument, "resumed request: resume %q tail %d; want tok-3 and no tail", r.GetResume(), r.GetTail())
			}
			return s.Send(&falconv1.LogLines{Lines: []*falconv1.LogLine{mk(4), mk(5)}})
		}
		return status.Error(codes.Internal, "called a third time")
	}
	url := clitest.Start(t, api)
	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdLogs(f, nil), "exp-two", "--role", "main", "-f", "--tail", "5"); err != nil {
		t.Fatal(err)
	}
	if want := "line 1\nline 2\nline 3\nline 4\nline 5\n"; s.Out.String() != want {
		t.Errorf("output %q; want %q", s.Out.String(), want)
	}
	if !strings.Contains(s.ErrOut.String(), "resuming") {
		t.Errorf("stderr %q does not say the stream was resumed", s.ErrOut.String())
	}
}
