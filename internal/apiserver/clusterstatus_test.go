package apiserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// capacityReport is a report as the resource manager sends it at time at:
// one owned and one idle pool, two queues.
func capacityReport(cluster string, at time.Time) *falconv1.ClusterStatus {
	return &falconv1.ClusterStatus{
		ClusterName: cluster,
		ReportedAt:  timestamppb.New(at),
		Reservation: &falconv1.ReservationCapacity{Name: "res-v7x", Count: 16, InUse: 12, Free: 4},
		NodePools: []*falconv1.NodePoolStatus{
			{
				Name: "falcon-job-aaaa", AcceleratorType: "tpu7x", Topology: "2x2x2", Nodes: 2, Status: "RUNNING",
				SupplyMode: "reservation", OwnerJobId: "job-aaaaaaaaaa", CreatedAt: timestamppb.New(at.Add(-time.Hour)),
			},
			{
				Name: "falcon-job-bbbb", AcceleratorType: "tpu7x", Topology: "2x2x4", Nodes: 4, Status: "RUNNING",
				SupplyMode: "flex-start", CreatedAt: timestamppb.New(at.Add(-3 * time.Hour)), IdleSince: timestamppb.New(at.Add(-5 * time.Minute)),
			},
		},
		Queues: []*falconv1.QueueStatus{
			{Topology: "2x2x2", AcceleratorTypes: []string{"tpu7x"}, Waiting: 3, AcquiringJobId: "job-cccccccccc", Running: 1},
			{Topology: "2x2x4", AcceleratorTypes: []string{"tpu7x"}, Running: 0},
		},
	}
}

// getClusterStatusHTTP reads a cluster's status through the gateway as a
// user would (curl, the CLI).
func getClusterStatusHTTP(t *testing.T, env *apitest.Env, name string) (int, *falconv1.ClusterStatus) {
	t.Helper()
	resp, err := http.Get("http://" + env.HTTPAddr + "/v1/clusters/" + name + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	out := &falconv1.ClusterStatus{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, out); err != nil {
		t.Fatalf("GET %s status: %v in %s", name, err, raw)
	}
	return resp.StatusCode, out
}

func TestClusterStatusReportAndRead(t *testing.T) {
	env := apitest.Start(t, map[string]string{"tpu-east": "gke", "fresh": "local"})
	ctx := context.Background()
	ctl := falconv1.NewClusterServiceClient(env.Conn)
	user := falconv1.NewClusterServiceClient(env.UserConn)

	// The older report is replaced by the newer: a read shows the last one.
	at := time.Date(2026, 11, 29, 11, 58, 0, 0, time.UTC)
	for _, st := range []*falconv1.ClusterStatus{
		{ClusterName: "tpu-east", ReportedAt: timestamppb.New(at.Add(-time.Minute)), Error: "cluster unreachable"},
		capacityReport("tpu-east", at),
	} {
		if _, err := ctl.ReportClusterStatus(ctx, &falconv1.ReportClusterStatusRequest{Status: st}); err != nil {
			t.Fatalf("controller reporting: %v", err)
		}
	}

	tests := []struct {
		name     string
		cluster  string
		want     *falconv1.ClusterStatus
		wantCode codes.Code
		wantHTTP int
	}{
		{name: "reported", cluster: "tpu-east", want: capacityReport("tpu-east", at), wantHTTP: http.StatusOK},
		{name: "never reported is empty but named", cluster: "fresh", want: &falconv1.ClusterStatus{ClusterName: "fresh"}, wantHTTP: http.StatusOK},
		{name: "unknown cluster", cluster: "mars", wantCode: codes.NotFound, wantHTTP: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := user.GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: tt.cluster})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("gRPC GetClusterStatus(%s) = %v, want code %s", tt.cluster, err, tt.wantCode)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("gRPC GetClusterStatus(%s) (-want +got):\n%s", tt.cluster, diff)
			}
			code, overHTTP := getClusterStatusHTTP(t, env, tt.cluster)
			if code != tt.wantHTTP {
				t.Fatalf("GET /v1/clusters/%s/status = HTTP %d, want %d", tt.cluster, code, tt.wantHTTP)
			}
			if diff := cmp.Diff(tt.want, overHTTP, protocmp.Transform()); diff != "" {
				t.Errorf("GET /v1/clusters/%s/status (-want +got):\n%s", tt.cluster, diff)
			}
		})
	}
}

// A report without reported_at is stamped when the server receives it, so
// readers can always say how old the view is.
func TestClusterStatusStampedOnReceipt(t *testing.T) {
	env := apitest.Start(t, map[string]string{"tpu-east": "gke"})
	ctx := context.Background()
	before := time.Now()
	report := capacityReport("tpu-east", before)
	report.ReportedAt = nil
	if _, err := falconv1.NewClusterServiceClient(env.Conn).ReportClusterStatus(ctx, &falconv1.ReportClusterStatusRequest{Status: report}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	got, err := falconv1.NewClusterServiceClient(env.UserConn).GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: "tpu-east"})
	if err != nil {
		t.Fatal(err)
	}
	// The store may keep less than nanoseconds; a second either way is
	// still "when it was received".
	if at := got.GetReportedAt().AsTime(); got.GetReportedAt() == nil || at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) {
		t.Errorf("reported_at = %v, want between %v and %v", got.GetReportedAt(), before, after)
	}
	if n := len(got.GetNodePools()); n != 2 {
		t.Errorf("%d node pools, want the 2 reported", n)
	}
}

func TestReportClusterStatusRefusesBadReports(t *testing.T) {
	env := apitest.Start(t, map[string]string{"tpu-east": "gke"})
	ctl := falconv1.NewClusterServiceClient(env.Conn)
	tests := []struct {
		name   string
		status *falconv1.ClusterStatus
		want   codes.Code
	}{
		{"no status", nil, codes.InvalidArgument},
		{"no cluster name", &falconv1.ClusterStatus{Error: "x"}, codes.InvalidArgument},
		{"unknown cluster", capacityReport("mars", time.Now()), codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ctl.ReportClusterStatus(context.Background(), &falconv1.ReportClusterStatusRequest{Status: tt.status})
			if status.Code(err) != tt.want {
				t.Errorf("ReportClusterStatus = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestAppendJobMessage(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	exp := env.Create(t, "notes", map[string]*falconv1.TaskSpec{
		"a": {Command: "sleep 1000", Replica: 1},
		"b": {Command: "sleep 1000", Replica: 1},
	})
	jobs := map[string]string{} // role -> job ID
	for _, j := range exp.GetJobs() {
		jobs[j.GetRole()] = j.GetId()
	}
	// A new job already says what it waits for; set the messages to known
	// ones, b's to none.
	for role, msg := range map[string]string{"a": "old", "b": ""} {
		if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{
			Id: jobs[role], ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: msg,
		}); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name     string
		id       string
		note     string
		want     string // the job's message afterwards
		wantCode codes.Code
	}{
		{name: "appends after the old message", id: jobs["a"], note: "note", want: "old; note"},
		{name: "no old message: the note alone", id: jobs["b"], note: "first", want: "first"},
		{name: "empty note", id: jobs["a"], wantCode: codes.InvalidArgument},
		{name: "no id", note: "x", wantCode: codes.InvalidArgument},
		{name: "unknown job", id: "job-0000000000", note: "x", wantCode: codes.NotFound},
		{name: "malformed id", id: "nope", note: "x", wantCode: codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := env.Jobs.AppendJobMessage(ctx, &falconv1.AppendJobMessageRequest{Id: tt.id, Note: tt.note})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("AppendJobMessage(%q, %q) = %v, want %s", tt.id, tt.note, err, tt.wantCode)
			}
			if tt.wantCode != codes.OK {
				return
			}
			if got.GetMessage() != tt.want {
				t.Errorf("returned message %q, want %q", got.GetMessage(), tt.want)
			}
			if read := env.Job(t, tt.id); read.GetMessage() != tt.want || read.GetStatus() != "Pending" {
				t.Errorf("stored job: message %q, status %s; want %q, Pending", read.GetMessage(), read.GetStatus(), tt.want)
			}
		})
	}
	if got := env.Job(t, jobs["a"]).GetMessage(); got != "old; note" {
		t.Errorf("refused appends changed the message to %q", got)
	}
}

// ReportClusterStatus and AppendJobMessage are the controllers' alone: a
// user is refused over gRPC, and the gateway has no route to them.
func TestClusterStatusInternalMethods(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	exp := env.Create(t, "internal", map[string]*falconv1.TaskSpec{"main": {Command: "sleep 1000", Replica: 1}})
	jobID := exp.GetJobs()[0].GetId()
	wantMessage := "from the controller"
	if m := env.Job(t, jobID).GetMessage(); m != "" {
		wantMessage = m + "; " + wantMessage
	}
	report := capacityReport("local", time.Date(2026, 11, 29, 11, 58, 0, 0, time.UTC))

	calls := []struct {
		name string
		call func(conn *grpc.ClientConn) error
	}{
		{"ReportClusterStatus", func(c *grpc.ClientConn) error {
			_, err := falconv1.NewClusterServiceClient(c).ReportClusterStatus(ctx, &falconv1.ReportClusterStatusRequest{Status: report})
			return err
		}},
		{"AppendJobMessage", func(c *grpc.ClientConn) error {
			_, err := falconv1.NewJobServiceClient(c).AppendJobMessage(ctx, &falconv1.AppendJobMessageRequest{Id: jobID, Note: "from the controller"})
			return err
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(env.UserConn); status.Code(err) != codes.PermissionDenied {
				t.Errorf("a user calling %s: %v; want PermissionDenied", tc.name, err)
			}
			if err := tc.call(env.Conn); err != nil {
				t.Errorf("the controller calling %s: %v", tc.name, err)
			}
		})
	}

	// No route, whatever the method; nothing a user sends over HTTP lands.
	body := `{"status": {"cluster_name": "local", "error": "forged"}, "id": "` + jobID + `", "note": "forged"}`
	for _, p := range []string{
		"/v1/clusters/local/status", "/v1/clusters/local:reportStatus", "/v1/clusters:reportStatus", "/v1/clusters/status",
		"/v1/jobs/" + jobID + ":appendMessage", "/v1/jobs/" + jobID + "/message", "/v1/jobs/" + jobID + "/messages",
	} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch} {
			req, err := http.NewRequest(m, "http://"+env.HTTPAddr+p, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode == http.StatusInternalServerError {
				t.Errorf("%s %s = %d; internal methods must have no HTTP route", m, p, resp.StatusCode)
			}
		}
	}
	got, err := falconv1.NewClusterServiceClient(env.UserConn).GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(report, got, protocmp.Transform()); diff != "" {
		t.Errorf("status after the refused calls (-controller's report +got):\n%s", diff)
	}
	if msg := env.Job(t, jobID).GetMessage(); msg != wantMessage {
		t.Errorf("job message %q after the refused calls, want %q: the controller's note alone", msg, wantMessage)
	}

	resp, err := http.Get("http://" + env.HTTPAddr + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"ReportClusterStatus", "AppendJobMessage"} {
		if strings.Contains(string(doc), "_"+m+"\"") {
			t.Errorf("OpenAPI document exposes %s", m)
		}
	}
	if !strings.Contains(string(doc), "ClusterService_GetClusterStatus") {
		t.Error("OpenAPI document lacks GetClusterStatus")
	}
}
