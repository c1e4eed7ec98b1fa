package list

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

func TestList(t *testing.T) {
	api := &clitest.API{
		ListExpsFunc: func(context.Context, *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
			return &falconv1.ListExpsResponse{
				Items:         []*falconv1.Experiment{{Id: "exp-q7odgo8q9x", Name: "bench", ExpType: "benchmark", Status: "Succeeded"}},
				NextPageToken: "tok2",
			}, nil
		},
	}
	url := clitest.Start(t, api)

	f, s := clitest.NewFactory(t, url, output.JSON)
	err := clitest.Execute(NewCmdList(f, nil), "--limit", "10", "--cluster", "v7x", "--status", "SUCCEEDED", "--type", "benchmark", "--creator", "alice", "--page-token", "tok1")
	if err != nil {
		t.Fatal(err)
	}
	want := &falconv1.ListExpsRequest{PageSize: 10, ClusterName: "v7x", Status: "Succeeded", ExpType: "benchmark", Creator: "alice", PageToken: "tok1"}
	if diff := cmp.Diff(want, api.Requests("ListExps")[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	items := got["items"].([]any)
	if len(items) != 1 || got["next_page_token"] != "tok2" || items[0].(map[string]any)["exp_type"] != "benchmark" || items[0].(map[string]any)["status"] != "Succeeded" {
		t.Errorf("json = %v", got)
	}

	f, s = clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdList(f, nil), "--limit=1"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Out.String(), "ID ") || !strings.Contains(s.Out.String(), "exp-q7odgo8q9x") {
		t.Errorf("table = %q", s.Out)
	}
	if !strings.Contains(s.ErrOut.String(), "--page-token tok2") {
		t.Errorf("stderr = %q, want the next page hint", s.ErrOut)
	}
}

func TestListBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--status", "done"}, `--status: unknown experiment status "done"; allowed: Created, Running, Succeeded, Failed, Aborting, Aborted`},
		{[]string{"--limit", "-1"}, "--limit: must not be negative"},
	}
	for _, tt := range tests {
		f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
		called := false
		err := clitest.Execute(NewCmdList(f, func(context.Context, *Options) error { called = true; return nil }), tt.args...)
		if errdefs.Code(err).String() != "InvalidArgument" || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want InvalidArgument containing %q", tt.args, err, tt.want)
		}
		if called {
			t.Errorf("%v: ran despite the bad flag", tt.args)
		}
	}
}

// An empty list filtered by a cluster the server does not know says so:
// a typo otherwise reads as "nothing ran there".
func TestListUnknownCluster(t *testing.T) {
	api := &clitest.API{
		ListExpsFunc: func(context.Context, *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
			return &falconv1.ListExpsResponse{}, nil
		},
		GetClusterFunc: func(_ context.Context, r *falconv1.GetClusterRequest) (*falconv1.Cluster, error) {
			if r.GetName() == "v7x-east" {
				return &falconv1.Cluster{Name: r.GetName()}, nil
			}
			return nil, status.Errorf(codes.NotFound, "cluster %s not found", r.GetName())
		},
	}
	url := clitest.Start(t, api)
	for _, tc := range []struct {
		cluster string
		hint    bool
	}{{"v7x-esat", true}, {"v7x-east", false}} {
		f, s := clitest.NewFactory(t, url, output.JSON)
		if err := clitest.Execute(NewCmdList(f, nil), "--cluster", tc.cluster); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(s.ErrOut.String(), `No cluster is named "`+tc.cluster+`"`); got != tc.hint {
			t.Errorf("--cluster %s: stderr %q; want the hint: %v", tc.cluster, s.ErrOut, tc.hint)
		}
		if !strings.Contains(s.Out.String(), "items") {
			t.Errorf("--cluster %s: stdout %q; want the (empty) list", tc.cluster, s.Out)
		}
	}
}
