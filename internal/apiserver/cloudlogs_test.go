package apiserver_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/cloudlog/cloudlogtest"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// A GKE job whose pods are gone and whose cluster has no bucket is read
// from Cloud Logging, over the real client, through the test server that
// speaks LoggingServiceV2; a Cloud Logging failure names what is missing
// and why.
func TestLogsFromCloudLogging(t *testing.T) {
	ctx := context.Background()
	srv := cloudlogtest.Start(t)
	r, err := cloudlog.New(ctx, srv.ClientOptions(), cloudlog.WithCallOptions(gax.WithRetry(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	env := apitest.Start(t, map[string]string{"gke-a": "gke"}, apiserver.WithCloudLogging(r))
	c, err := env.Store.GetCluster(ctx, "gke-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Project, c.Location, c.Spec.Namespace, c.Spec.GKECluster = "proj-1", "us-central1", "jobs", "edge-1"
	if _, err := env.Store.UpsertCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	exp := env.Create(t, "from-cloud-logging", map[string]*falconv1.TaskSpec{"main": {Command: "train", Replica: 2, Image: "trainer:v1"}})
	job := exp.GetJobs()[0].GetId()
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Running", ClusterName: "gke-a"}); err != nil {
		t.Fatal(err)
	}
	w := cloudlogtest.Workload{Project: "proj-1", Location: "us-central1", Cluster: "edge-1", Namespace: "jobs", Job: job}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for rank := range 2 {
		for i, text := range []string{"starting", "step_time=0.5", "done"} {
			srv.Append(w.Entry(w.Pod(rank), rank, t0.Add(time.Duration(rank*10+i)*time.Second), text))
		}
	}

	read := func(req *falconv1.GetExpLogsRequest) ([]*falconv1.LogLine, error) {
		st, err := env.Exps.GetExpLogs(ctx, req)
		if err != nil {
			return nil, err
		}
		var out []*falconv1.LogLine
		for {
			l, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, l.GetLines()...)
		}
	}
	lines, err := read(&falconv1.GetExpLogsRequest{Id: exp.GetId()})
	if err != nil || len(lines) != 6 {
		t.Fatalf("logs: %d lines, %v", len(lines), err)
	}
	for _, l := range lines {
		if l.GetJobId() != job || l.GetRole() != "main" || l.GetTime() == nil || (l.GetRank() != 0 && l.GetRank() != 1) {
			t.Errorf("line %+v", l)
		}
	}
	one := int32(1)
	lines, err = read(&falconv1.GetExpLogsRequest{Id: exp.GetId(), Rank: &one, Grep: "step_time"})
	if err != nil || len(lines) != 1 || lines[0].GetLine() != "step_time=0.5" || lines[0].GetRank() != 1 {
		t.Errorf("rank 1, grep: %v %v", lines, err)
	}

	srv.Fail("ListLogEntries", codes.PermissionDenied, 1)
	_, err = read(&falconv1.GetExpLogsRequest{Id: exp.GetId()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "roles/logging.viewer") || !strings.Contains(err.Error(), job) {
		t.Errorf("permission denied by Cloud Logging = %v; want FailedPrecondition naming the job and the role", err)
	}
	// The job itself is untouched by a log retrieval failure.
	if got := env.Job(t, job).GetStatus(); got != "Running" {
		t.Errorf("job is %s after a log failure", got)
	}
}
