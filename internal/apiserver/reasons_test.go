package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

const (
	pendingReasons = "Waiting, Next, WaitingForPool, Provisioning, ProvisioningFallback, Dispatching"
	failedReasons  = "NodePoolTimeout, NodePoolFailed, JobSubmitFailed, JobFailed, Timeout"
)

// A job's Reason belongs to its status (000 section 9): one of the Pending
// reasons while Pending, one of the Failed reasons when Failed, and none
// otherwise. The internal write paths refuse anything else by name, and
// leave the job as it was.
func TestJobReasonsBelongToTheirStatus(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	tests := []struct {
		name             string
		steps            [][3]string // from, to, reason: written first, each must succeed
		from, to, reason string
		refusal          string // empty: allowed
	}{
		{name: "Pending reason", from: "Pending", to: "Pending", reason: "Provisioning"},
		{name: "Pending, no reason", from: "Pending", to: "Pending"},
		{name: "unknown Pending reason", from: "Pending", to: "Pending", reason: "Sleeping",
			refusal: `reason: "Sleeping" is not a reason of a Pending job; allowed: ` + pendingReasons},
		{name: "Failed reason while Pending", from: "Pending", to: "Pending", reason: "JobFailed",
			refusal: "allowed: " + pendingReasons},
		{name: "Running with a reason", from: "Pending", to: "Running", reason: "Dispatching",
			refusal: `reason: must be empty for status Running, got "Dispatching"`},
		{name: "Running", from: "Pending", to: "Running"},
		{name: "Failed reason", steps: [][3]string{{"Pending", "Running", ""}}, from: "Running", to: "Failed", reason: "Timeout"},
		{name: "Pending reason on Failed", steps: [][3]string{{"Pending", "Running", ""}}, from: "Running", to: "Failed", reason: "Waiting",
			refusal: `"Waiting" is not a reason of a Failed job; allowed: ` + failedReasons},
		{name: "experiment reason on Failed", steps: [][3]string{{"Pending", "Running", ""}}, from: "Running", to: "Failed", reason: "RoleFailed",
			refusal: "allowed: " + failedReasons},
		{name: "Succeeded with a reason", steps: [][3]string{{"Pending", "Running", ""}}, from: "Running", to: "Succeeded", reason: "JobFailed",
			refusal: "must be empty for status Succeeded"},
		{name: "Aborted with a reason", steps: [][3]string{{"Pending", "Aborting", ""}}, from: "Aborting", to: "Aborted", reason: "SiblingFailed",
			refusal: "must be empty for status Aborted"},
	}
	n := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, via := range []string{"UpdateJobStatus", "UpdateJobStatuses"} {
				n++
				job := env.Create(t, fmt.Sprintf("r%d", n), map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}).GetJobs()[0].GetId()
				for _, s := range tt.steps {
					if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: s[0], Status: s[1], Reason: s[2]}); err != nil {
						t.Fatal(err)
					}
				}
				before := env.Job(t, job)
				req := &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: tt.from, Status: tt.to, Reason: tt.reason, Message: "m"}
				var (
					code codes.Code
					msg  string
				)
				if via == "UpdateJobStatus" {
					_, err := env.Jobs.UpdateJobStatus(ctx, req)
					code, msg = status.Code(err), status.Convert(err).Message()
				} else {
					resp, err := env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{Updates: []*falconv1.UpdateJobStatusRequest{req}})
					if err != nil {
						t.Fatal(err)
					}
					code, msg = codes.Code(resp.GetResults()[0].GetCode()), resp.GetResults()[0].GetMessage()
				}
				after := env.Job(t, job)
				switch {
				case tt.refusal == "" && code != codes.OK:
					t.Errorf("%s: %v %s", via, code, msg)
				case tt.refusal == "" && (after.GetStatus() != tt.to || after.GetReason() != tt.reason):
					t.Errorf("%s: job is %s/%q, want %s/%q", via, after.GetStatus(), after.GetReason(), tt.to, tt.reason)
				case tt.refusal != "" && (code != codes.InvalidArgument || !strings.Contains(msg, tt.refusal)):
					t.Errorf("%s: %v %q; want InvalidArgument containing %q", via, code, msg, tt.refusal)
				case tt.refusal != "" && after.GetVersion() != before.GetVersion():
					t.Errorf("%s: the refused update was written: %v", via, after)
				}
			}
		})
	}
}

// AbortJob moves a job to Aborting, which carries no Reason: why is in the
// Message.
func TestAbortJobTakesNoReason(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	job := env.Create(t, "a", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}).GetJobs()[0].GetId()
	_, err := env.Jobs.AbortJob(ctx, &falconv1.AbortJobRequest{Id: job, Reason: "SiblingFailed", Message: "stopped because role b failed"})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `reason: must be empty for status Aborting, got "SiblingFailed"`) ||
		!strings.Contains(st.Message(), pendingReasons) || !strings.Contains(st.Message(), failedReasons) {
		t.Fatalf("AbortJob with a reason: %v; want InvalidArgument naming reason and the allowed values", err)
	}
	if j := env.Job(t, job); j.GetStatus() != "Pending" {
		t.Fatalf("after the refused abort the job is %s", j.GetStatus())
	}
	j, err := env.Jobs.AbortJob(ctx, &falconv1.AbortJobRequest{Id: job, Message: "stopped because role b failed"})
	if err != nil || j.GetStatus() != "Aborting" || j.GetReason() != "" {
		t.Fatalf("AbortJob without a reason: %v, %v", j, err)
	}
}
