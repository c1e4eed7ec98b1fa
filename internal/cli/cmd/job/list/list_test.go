package list

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

func TestList(t *testing.T) {
	api := &clitest.API{
		ListJobsFunc: func(context.Context, *falconv1.ListJobsRequest) (*falconv1.ListJobsResponse, error) {
			return &falconv1.ListJobsResponse{Items: []*falconv1.Job{
				{Id: "job-ki5t2jegpi", ExpId: "exp-q7odgo8q9x", Role: "worker", ClusterName: "v7x", Status: "Pending", Reason: "Waiting", Replica: 4},
			}}, nil
		},
	}
	url := clitest.Start(t, api)

	f, s := clitest.NewFactory(t, url, output.JSON)
	err := clitest.Execute(NewCmdList(f, nil), "--exp", "exp-q7odgo8q9x", "--status", "pending,RUNNING", "--status", "failed", "--cluster", "v7x", "--limit", "5", "--page-token", "p")
	if err != nil {
		t.Fatal(err)
	}
	want := &falconv1.ListJobsRequest{ExpId: "exp-q7odgo8q9x", Statuses: []string{"Pending", "Running", "Failed"}, ClusterName: "v7x", PageSize: 5, PageToken: "p"}
	if diff := cmp.Diff(want, api.Requests("ListJobs")[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["next_page_token"]; !ok || got["items"].([]any)[0].(map[string]any)["exp_id"] != "exp-q7odgo8q9x" {
		t.Errorf("json = %v", got)
	}

	f, s = clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdList(f, nil)); err != nil {
		t.Fatal(err)
	}
	wantTable := "ID              EXP             ROLE    CLUSTER  STATUS   REASON   REPLICA  AGE\n" +
		"job-ki5t2jegpi  exp-q7odgo8q9x  worker  v7x      Pending  Waiting  4        -\n"
	if diff := cmp.Diff(wantTable, s.Out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	f, _ = clitest.NewFactory(t, url, output.Table)
	err = clitest.Execute(NewCmdList(f, nil), "--status", "Created")
	if errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "allowed: Pending, Running, Succeeded, Failed, Aborting, Aborted") {
		t.Errorf("job status Created: %v", err)
	}
}
