package apiserver_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestUpdateJobStatuses(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := env.Create(t, "batch", map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}, "b": {Command: "x", Replica: 1}})
	a, b := exp.GetJobs()[0].GetId(), exp.GetJobs()[1].GetId()
	ctx := context.Background()
	resp, err := env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{Updates: []*falconv1.UpdateJobStatusRequest{
		{Id: a, ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: "queue position 1"},
		{Id: b, ExpectedStatus: "Running", Status: "Running"},
		{Id: b, ExpectedStatus: "Pending", Status: "Bogus"},
		{Id: b, ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: "queue position 2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		code codes.Code
		msg  string // the written job's message
	}{
		{"written", codes.OK, "queue position 1"},
		{"stale precondition", codes.FailedPrecondition, ""},
		{"invalid status", codes.InvalidArgument, ""},
		{"written after a refusal", codes.OK, "queue position 2"},
	}
	for i, tc := range tests {
		r := resp.GetResults()[i]
		if codes.Code(r.GetCode()) != tc.code || r.GetJob().GetMessage() != tc.msg {
			t.Errorf("%s: code %v %q, job message %q; want %v, %q", tc.name, codes.Code(r.GetCode()), r.GetMessage(), r.GetJob().GetMessage(), tc.code, tc.msg)
		}
	}
	// Controllers only.
	_, err = falconv1.NewJobServiceClient(env.UserConn).UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a user's batch: %v, want PermissionDenied", err)
	}
	// Bounded.
	_, err = env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{Updates: make([]*falconv1.UpdateJobStatusRequest, 1001)})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("1001 updates: %v, want InvalidArgument", err)
	}
}

// A batch asked for configs returns each written job with its experiment's
// config, as GetJob does, so the resource manager submits a pick without
// reading it again; without the flag the answer carries none.
func TestUpdateJobStatusesWithConfig(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := env.Create(t, "cfg", map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}})
	id := exp.GetJobs()[0].GetId()
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		withConfig bool
		expected   string // the status the update expects
		want       string // the written job's config
	}{
		{"without the flag", false, "Pending", ""},
		{"with the flag", true, "Pending", "cfg-cfg"},
		{"a refused update carries no job", true, "Running", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{WithConfig: tc.withConfig, Updates: []*falconv1.UpdateJobStatusRequest{
				{Id: id, ExpectedStatus: tc.expected, Status: "Pending", Reason: "Waiting", Message: tc.name},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetResults()[0].GetJob().GetConfig(); got != tc.want {
				t.Errorf("config %q, want %q", got, tc.want)
			}
		})
	}
}
