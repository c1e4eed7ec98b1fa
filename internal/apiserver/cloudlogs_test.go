package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
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

	read := func(req *falconv1.GetExpLogsRequest) ([]*falconv1.LogLine, error) { return readLogs(ctx, env, req) }
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

// An xpk job's logs are its JobSet's: the pods of each slice's Job,
// <workload>-slice-job-<slice>, as GKE labels their entries. Ranks run on
// across slices; a server without Cloud Logging says where the logs are.
func TestXpkLogsFromCloudLogging(t *testing.T) {
	ctx := context.Background()
	srv := cloudlogtest.Start(t)
	r, err := cloudlog.New(ctx, srv.ClientOptions(), cloudlog.WithCallOptions(gax.WithRetry(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	env := apitest.Start(t, map[string]string{"xpk-a": "xpk"}, apiserver.WithCloudLogging(r))
	c, err := env.Store.GetCluster(ctx, "xpk-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Project, c.Location, c.Spec.GKECluster = "proj-x", "us-east5-a", "tpu-cluster"
	if _, err := env.Store.UpsertCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		slices int32
	}{{"one slice", 0}, {"two slices", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			exp := env.Create(t, "xpk-logs-"+strconv.Itoa(int(tc.slices)), map[string]*falconv1.TaskSpec{"main": {
				Command: "train", Replica: 2, Image: "trainer:v1", DeviceType: "v5p", DeviceTopo: "2x2x2", Slices: tc.slices,
			}})
			job := exp.GetJobs()[0].GetId()
			if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Running", ClusterName: "xpk-a"}); err != nil {
				t.Fatal(err)
			}
			slices := int(max(tc.slices, 1))
			t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			for s := range slices {
				w := cloudlogtest.Workload{Project: "proj-x", Location: "us-east5-a", Cluster: "tpu-cluster", Namespace: "default",
					Job: "falcon-" + job + "-slice-job-" + strconv.Itoa(s)}
				for idx := range 2 {
					srv.Append(w.Entry(w.Pod(idx), idx, t0.Add(time.Duration(s*2+idx)*time.Second), fmt.Sprintf("hello from slice %d host %d", s, idx)))
				}
			}
			// A Falcon job of the same ID on another backend would be named
			// without the workload prefix; its lines must not show up.
			other := cloudlogtest.Workload{Project: "proj-x", Location: "us-east5-a", Cluster: "tpu-cluster", Namespace: "default", Job: job}
			srv.Append(other.Entry(other.Pod(0), 0, t0, "not this job's"))

			lines, err := readLogs(ctx, env, &falconv1.GetExpLogsRequest{Id: exp.GetId()})
			if err != nil || len(lines) != 2*slices {
				t.Fatalf("logs: %d lines, %v; want %d", len(lines), err, 2*slices)
			}
			for _, l := range lines {
				var s, idx int
				if _, err := fmt.Sscanf(l.GetLine(), "hello from slice %d host %d", &s, &idx); err != nil {
					t.Fatalf("line %q: %v", l.GetLine(), err)
				}
				if int(l.GetRank()) != s*2+idx || l.GetJobId() != job {
					t.Errorf("line %q has rank %d, job %s; want rank %d", l.GetLine(), l.GetRank(), l.GetJobId(), s*2+idx)
				}
			}
			last := int32(2*slices - 1)
			lines, err = readLogs(ctx, env, &falconv1.GetExpLogsRequest{Id: exp.GetId(), Rank: &last})
			want := fmt.Sprintf("hello from slice %d host 1", slices-1)
			if err != nil || len(lines) != 1 || lines[0].GetLine() != want || lines[0].GetRank() != last {
				t.Errorf("rank %d: %v, %v; want the one line %q", last, lines, err, want)
			}
		})
	}

	noLogging := apitest.Start(t, map[string]string{"xpk-b": "xpk"})
	exp := noLogging.Create(t, "xpk-no-logging", map[string]*falconv1.TaskSpec{"main": {Command: "train", Replica: 1, Image: "trainer:v1"}})
	job := exp.GetJobs()[0].GetId()
	if _, err := noLogging.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Running", ClusterName: "xpk-b"}); err != nil {
		t.Fatal(err)
	}
	_, err = readLogs(ctx, noLogging, &falconv1.GetExpLogsRequest{Id: exp.GetId()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "Cloud Logging") || !strings.Contains(err.Error(), "xpk-b") {
		t.Errorf("xpk logs without Cloud Logging = %v; want FailedPrecondition naming the cluster and Cloud Logging", err)
	}
}

func readLogs(ctx context.Context, env *apitest.Env, req *falconv1.GetExpLogsRequest) ([]*falconv1.LogLine, error) {
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

// Following an xpk job's logs streams every slice's lines as Cloud Logging
// ingests them, and ends once the job has ended and its last lines had
// time to arrive.
func TestFollowXpkLogs(t *testing.T) {
	ctx := context.Background()
	srv := cloudlogtest.Start(t)
	r, err := cloudlog.New(ctx, srv.ClientOptions(), cloudlog.WithCallOptions(gax.WithRetry(nil)), cloudlog.WithLateness(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	env := apitest.Start(t, map[string]string{"xpk-f": "xpk"}, apiserver.WithCloudLogging(r), apiserver.WithLogPoll(50*time.Millisecond))
	c, err := env.Store.GetCluster(ctx, "xpk-f")
	if err != nil {
		t.Fatal(err)
	}
	c.Project, c.Location, c.Spec.GKECluster = "proj-f", "us-east5-a", "tpu-f"
	if _, err := env.Store.UpsertCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	exp := env.Create(t, "xpk-follow", map[string]*falconv1.TaskSpec{"main": {
		Command: "train", Replica: 1, Image: "trainer:v1", DeviceType: "v5p", DeviceTopo: "2x2x1", Slices: 2,
	}})
	job := exp.GetJobs()[0].GetId()
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Running", ClusterName: "xpk-f"}); err != nil {
		t.Fatal(err)
	}
	slice := func(s int) cloudlogtest.Workload {
		return cloudlogtest.Workload{Project: "proj-f", Location: "us-east5-a", Cluster: "tpu-f", Namespace: "default", Job: "falcon-" + job + "-slice-job-" + strconv.Itoa(s)}
	}
	srv.Append(slice(0).Entry(slice(0).Pod(0), 0, time.Now(), "before the follow"))

	st, err := env.Exps.GetExpLogs(ctx, &falconv1.GetExpLogsRequest{Id: exp.GetId(), Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan *falconv1.LogLine, 16)
	ended := make(chan error, 1)
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				ended <- err
				return
			}
			for _, l := range m.GetLines() {
				lines <- l
			}
		}
	}()
	next := func(what string) *falconv1.LogLine {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case err := <-ended:
			t.Fatalf("waiting for %s, the stream ended: %v", what, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("no line %s", what)
		}
		return nil
	}
	if l := next("from before"); l.GetLine() != "before the follow" || l.GetRank() != 0 {
		t.Errorf("first line %+v", l)
	}
	// Lines ingested after the follow began, from the second slice: rank 1.
	srv.Append(slice(1).Entry(slice(1).Pod(0), 0, time.Now(), "while following"))
	if l := next("ingested while following"); l.GetLine() != "while following" || l.GetRank() != 1 {
		t.Errorf("followed line %+v; want rank 1's", l)
	}
	select {
	case err := <-ended:
		t.Fatalf("the follow ended while the job runs: %v", err)
	default:
	}
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Running", Status: "Succeeded"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) {
			t.Errorf("the follow ended with %v; want a clean end", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follow did not end after the job did")
	}
}
