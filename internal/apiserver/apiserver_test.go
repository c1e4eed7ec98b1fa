package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

type env struct {
	base    string // http://host:port
	conn    *grpc.ClientConn
	exps    falconv1.ExperimentServiceClient // alice's
	ctlExps falconv1.ExperimentServiceClient // the controller's
	jobs    falconv1.JobServiceClient        // the controller's
	arts    falconv1.ArtifactServiceClient   // the controller's
	logDir  string
}

// start serves a real API server over loopback gRPC and HTTP, on SQLite,
// with every call from the user alice unless it carries the controller secret.
func start(t *testing.T) *env {
	t.Helper()
	a := apitest.Start(t, map[string]string{"local": "local"},
		apiserver.WithLogPoll(20*time.Millisecond),
		apiserver.WithAuthenticator(auth.Local{P: auth.Principal{UserID: "local:alice", Email: "alice@localhost"}}))
	return &env{
		base: "http://" + a.HTTPAddr, conn: a.UserConn, logDir: filepath.Join(a.Dir, "logs"),
		exps:    falconv1.NewExperimentServiceClient(a.UserConn),
		ctlExps: falconv1.NewExperimentServiceClient(a.Conn),
		jobs:    a.Jobs,
		arts:    a.Arts,
	}
}

func (e *env) http(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 && json.Unmarshal(raw, &out) != nil {
		t.Fatalf("%s %s: non-JSON body %q", method, path, raw)
	}
	return resp.StatusCode, out
}

const twoRoles = `{"experiment": {
  "name": "hello", "exp_type": "benchmark", "cluster_name": "local", "config": "model: qwen",
  "role_to_task_spec": {
    "main":   {"command": "echo main", "replica": 1},
    "worker": {"command": "echo worker", "replica": 2, "timeout_seconds": 60}
  }}}`

func TestCreateGetOverHTTP(t *testing.T) {
	e := start(t)
	code, exp := e.http(t, "POST", "/v1/experiments", twoRoles)
	if code != 200 {
		t.Fatalf("create: %d %v", code, exp)
	}
	id, _ := exp["id"].(string)
	if !ids.Valid(ids.Experiment, id) {
		t.Fatalf("id %q is not exp- plus ten [a-z0-9]", id)
	}
	for k, want := range map[string]any{"status": "Created", "name": "hello", "exp_type": "benchmark", "creator": "alice@localhost", "config": "model: qwen"} {
		if exp[k] != want {
			t.Errorf("%s = %v, want %v", k, exp[k], want)
		}
	}
	for _, k := range []string{"reason", "message", "created_at", "jobs", "artifact", "cluster_name"} {
		if _, ok := exp[k]; !ok {
			t.Errorf("JSON lacks %q: scripts rely on snake_case keys being present", k)
		}
	}
	jobs := exp["jobs"].([]any)
	if len(jobs) != 2 {
		t.Fatalf("want 2 jobs (one per role), got %d", len(jobs))
	}
	for _, j := range jobs {
		j := j.(map[string]any)
		if j["status"] != "Pending" || j["reason"] != "Waiting" || !ids.Valid(ids.Job, j["id"].(string)) {
			t.Errorf("job %v: want Pending/Waiting with a job- id", j)
		}
	}
	art := exp["artifact"].(map[string]any)
	if art["status"] != "Created" || !ids.Valid(ids.Artifact, art["id"].(string)) || !strings.Contains(art["path"].(string), "/experiments/"+id+"/artifacts/") {
		t.Errorf("artifact %v", art)
	}

	code, got := e.http(t, "GET", "/v1/experiments/"+id, "")
	if code != 200 || got["id"] != id || len(got["jobs"].([]any)) != 2 {
		t.Fatalf("get: %d %v", code, got)
	}
	// And over gRPC.
	g, err := e.exps.GetExp(context.Background(), &falconv1.GetExpRequest{Id: id})
	if err != nil || g.GetName() != "hello" {
		t.Fatalf("grpc get: %v %v", g, err)
	}
}

// TestTaskResourcesRoundTrip shows a task's resources coming back from the
// store exactly as given, on the experiment's roles and on its job, over
// gRPC and in the JSON that `falcon exp get --output json` prints.
func TestTaskResourcesRoundTrip(t *testing.T) {
	e := start(t)
	roles := map[string]*falconv1.TaskSpec{
		"prep": {Command: "python prep.py", Replica: 1, DeviceType: "cpu", Resources: &falconv1.Resources{
			Requests: map[string]string{"cpu": "2", "memory": "4Gi"},
			Limits:   map[string]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "20Gi"},
		}},
		"main": {Command: "echo main", Replica: 1},
	}
	created, err := e.exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "resources", RoleToTaskSpec: roles,
	}})
	if err != nil {
		t.Fatalf("CreateExp: %v", err)
	}
	got, err := e.exps.GetExp(context.Background(), &falconv1.GetExpRequest{Id: created.GetId()})
	if err != nil {
		t.Fatalf("GetExp: %v", err)
	}
	if diff := cmp.Diff(roles, got.GetRoleToTaskSpec(), protocmp.Transform()); diff != "" {
		t.Errorf("GetExp role_to_task_spec (-want +got):\n%s", diff)
	}
	for _, j := range got.GetJobs() {
		if diff := cmp.Diff(roles[j.GetRole()], j.GetTaskSpec(), protocmp.Transform()); diff != "" {
			t.Errorf("job %s task_spec (-want +got):\n%s", j.GetRole(), diff)
		}
	}

	code, body := e.http(t, "GET", "/v1/experiments/"+created.GetId(), "")
	if code != 200 {
		t.Fatalf("get: %d %v", code, body)
	}
	prep := body["role_to_task_spec"].(map[string]any)["prep"].(map[string]any)
	if diff := cmp.Diff(map[string]any{
		"requests": map[string]any{"cpu": "2", "memory": "4Gi"},
		"limits":   map[string]any{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "20Gi"},
	}, prep["resources"]); diff != "" {
		t.Errorf("JSON resources (-want +got):\n%s", diff)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	e := start(t)
	tests := []struct {
		name, body, field string
	}{
		{"missing name", `{"experiment":{"role_to_task_spec":{"w":{"command":"x","replica":1}}}}`, "name"},
		{"no roles", `{"experiment":{"name":"a"}}`, "role_to_task_spec"},
		{"empty command", `{"experiment":{"name":"a","role_to_task_spec":{"w":{"command":"","replica":1}}}}`, "role_to_task_spec.w.command"},
		{"replica 0", `{"experiment":{"name":"a","role_to_task_spec":{"w":{"command":"x","replica":0}}}}`, "role_to_task_spec.w.replica"},
		{"unknown cluster", `{"experiment":{"name":"a","cluster_name":"mars","role_to_task_spec":{"w":{"command":"x","replica":1}}}}`, "cluster_name"},
		{"bad topo", `{"experiment":{"name":"a","role_to_task_spec":{"w":{"command":"x","replica":1,"device_topo":"2by2"}}}}`, "device_topo"},
		{"unknown JSON key", `{"experiment":{"name":"a","bogus":1}}`, "bogus"},
		{"limit below request", `{"experiment":{"name":"a","role_to_task_spec":{"w":{"command":"x","replica":1,"resources":{"requests":{"memory":"2Gi"},"limits":{"memory":"1Gi"}}}}}}`, "role_to_task_spec.w.resources.limits.memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := e.http(t, "POST", "/v1/experiments", tt.body)
			if code != 400 {
				t.Fatalf("code %d, want 400: %v", code, body)
			}
			if msg, _ := body["message"].(string); !strings.Contains(msg, tt.field) {
				t.Errorf("message %q does not name %q", msg, tt.field)
			}
		})
	}
	_, list := e.http(t, "GET", "/v1/experiments", "")
	if items := list["items"].([]any); len(items) != 0 {
		t.Fatalf("bad input wrote %d experiments", len(items))
	}
	resp, err := e.jobs.ListJobs(context.Background(), &falconv1.ListJobsRequest{})
	if err != nil || len(resp.GetItems()) != 0 {
		t.Fatalf("bad input wrote jobs: %v %v", resp, err)
	}
}

func TestValidateOnlyWritesNothing(t *testing.T) {
	e := start(t)
	code, body := e.http(t, "POST", "/v1/experiments", strings.Replace(twoRoles, `{"experiment"`, `{"validate_only": true, "experiment"`, 1))
	if code != 200 || body["name"] != "hello" {
		t.Fatalf("validate: %d %v", code, body)
	}
	_, list := e.http(t, "GET", "/v1/experiments", "")
	if len(list["items"].([]any)) != 0 {
		t.Fatal("validate_only wrote an experiment")
	}
	// Nothing a script could mistake for a real experiment's.
	for _, k := range []string{"id", "status", "artifact_path", "artifact"} {
		if v, ok := body[k]; ok && v != "" && v != nil {
			t.Errorf("validate answered %s = %v; only a create makes one", k, v)
		}
	}
	for _, j := range body["jobs"].([]any) {
		if id := j.(map[string]any)["id"]; id != "" && id != nil {
			t.Errorf("validate answered a job id %v", id)
		}
	}
	// A name already taken fails validation exactly as the create would.
	e.http(t, "POST", "/v1/experiments", twoRoles)
	code, body = e.http(t, "POST", "/v1/experiments", strings.Replace(twoRoles, `{"experiment"`, `{"validate_only": true, "experiment"`, 1))
	if code != 409 || !strings.Contains(fmt.Sprint(body["message"]), `name: "hello" is already used`) {
		t.Errorf("validate of a taken name: %d %v, want 409 naming the field", code, body)
	}
}

func TestNotFoundAndDuplicate(t *testing.T) {
	e := start(t)
	if code, _ := e.http(t, "GET", "/v1/experiments/exp-0000000000", ""); code != 404 {
		t.Errorf("unknown id: %d, want 404", code)
	}
	if code, _ := e.http(t, "GET", "/v1/experiments/not-an-id", ""); code != 404 {
		t.Errorf("malformed id: %d, want 404", code)
	}
	_, err := e.exps.GetExp(context.Background(), &falconv1.GetExpRequest{Id: "exp-0000000000"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("grpc: %v, want NotFound", err)
	}
	e.http(t, "POST", "/v1/experiments", twoRoles)
	if code, body := e.http(t, "POST", "/v1/experiments", twoRoles); code != 409 {
		t.Errorf("duplicate name: %d %v, want 409", code, body)
	}
}

func TestInternalMethodsNotOnGateway(t *testing.T) {
	e := start(t)
	_, exp := e.http(t, "POST", "/v1/experiments", twoRoles)
	jobID := exp["jobs"].([]any)[0].(map[string]any)["id"].(string)
	for _, p := range []string{
		"/v1/jobs/" + jobID + ":updateStatus", "/v1/jobs/" + jobID + "/status", "/v1/jobs:watch",
		"/v1/experiments/" + exp["id"].(string) + ":updateStatus", "/v1/jobs/" + jobID + ":abort",
	} {
		for _, m := range []string{"POST", "PUT", "PATCH"} {
			if code, _ := e.http(t, m, p, `{"status":"Succeeded","expected_status":"Pending"}`); code < 400 || code == 500 {
				t.Errorf("%s %s = %d; internal methods must have no HTTP route", m, p, code)
			}
		}
	}
	resp, err := http.Get(e.base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"UpdateJobStatus", "UpdateExpStatus", "UpdateArtifactStatus", "WatchChanges", "AbortJob"} {
		if strings.Contains(string(doc), "_"+m+"\"") {
			t.Errorf("OpenAPI document exposes %s", m)
		}
	}
	if !strings.Contains(string(doc), "ExperimentService_CreateExp") {
		t.Error("OpenAPI document lacks CreateExp")
	}
	// The job must be untouched.
	j, _ := e.jobs.GetJob(context.Background(), &falconv1.GetJobRequest{Id: jobID})
	if j.GetStatus() != "Pending" {
		t.Fatalf("job became %s through the gateway", j.GetStatus())
	}
}

func TestStatusUpdatesArePreconditioned(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	created, err := e.exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "p", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"w": {Command: "x", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	job := created.GetJobs()[0].GetId()
	tests := []struct {
		name     string
		req      *falconv1.UpdateJobStatusRequest
		wantCode codes.Code
	}{
		{"illegal Pending->Succeeded", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Succeeded"}, codes.FailedPrecondition},
		{"stale expected status", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Running", Status: "Succeeded"}, codes.FailedPrecondition},
		{"missing expected status", &falconv1.UpdateJobStatusRequest{Id: job, Status: "Running"}, codes.InvalidArgument},
		{"not a status", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Done"}, codes.InvalidArgument},
		{"unknown job", &falconv1.UpdateJobStatusRequest{Id: "job-0000000000", ExpectedStatus: "Pending", Status: "Running"}, codes.NotFound},
		{"finished_at on what is no end", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Running", FinishedAt: timestamppb.Now()}, codes.InvalidArgument},
		{"finished_at that is no time", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Failed", FinishedAt: &timestamppb.Timestamp{Seconds: 1 << 40}}, codes.InvalidArgument},
		{"started_at on what is no start", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Pending", Reason: "Dispatching", StartedAt: timestamppb.Now()}, codes.InvalidArgument},
		{"started_at that is no time", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Running", StartedAt: &timestamppb.Timestamp{Nanos: -1}}, codes.InvalidArgument},
		{"legal progress update", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Pending", Reason: "Dispatching", Message: "m"}, codes.OK},
		{"legal Pending->Running, lower-case accepted", &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "pending", Status: "running"}, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.jobs.UpdateJobStatus(ctx, tt.req)
			if status.Code(err) != tt.wantCode {
				t.Fatalf("got %v, want %v", err, tt.wantCode)
			}
			if tt.req.FinishedAt != nil && !strings.Contains(status.Convert(err).Message(), "finished_at") {
				t.Errorf("refusal %q does not name finished_at", status.Convert(err).Message())
			}
			if tt.req.StartedAt != nil && !strings.Contains(status.Convert(err).Message(), "started_at") {
				t.Errorf("refusal %q does not name started_at", status.Convert(err).Message())
			}
		})
	}
	j, _ := e.jobs.GetJob(ctx, &falconv1.GetJobRequest{Id: job})
	if j.GetStatus() != "Running" || j.GetStartedAt() == nil {
		t.Fatalf("job = %s started_at=%v, want Running with started_at", j.GetStatus(), j.GetStartedAt())
	}
}

func TestAbortAndDelete(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	_, exp := e.http(t, "POST", "/v1/experiments", twoRoles)
	id := exp["id"].(string)

	if code, body := e.http(t, "DELETE", "/v1/experiments/"+id, ""); code != 400 || !strings.Contains(fmt.Sprint(body["message"]), "abort it first") {
		t.Fatalf("delete live: %d %v, want 400 FailedPrecondition telling to abort first", code, body)
	}
	code, ab := e.http(t, "POST", "/v1/experiments/"+id+":abort", `{"reason":"wrong config"}`)
	if code != 200 || ab["changed"] != true {
		t.Fatalf("abort: %d %v", code, ab)
	}
	got := ab["experiment"].(map[string]any)
	if got["status"] != "Aborting" || got["aborting_at"] == nil || !strings.Contains(got["message"].(string), "wrong config") {
		t.Fatalf("aborted exp %v", got)
	}
	for _, j := range got["jobs"].([]any) {
		j := j.(map[string]any)
		if j["status"] != "Aborting" || j["aborting_at"] == nil {
			t.Fatalf("job after abort: %v", j)
		}
		// A controller that read the job as Pending before the abort loses.
		_, err := e.jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j["id"].(string), ExpectedStatus: "Pending", Status: "Running"})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("stale update over abort: %v, want FailedPrecondition", err)
		}
		if _, err := e.jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j["id"].(string), ExpectedStatus: "Aborting", Status: "Aborted"}); err != nil {
			t.Fatal(err)
		}
	}
	_, again := e.http(t, "POST", "/v1/experiments/"+id+":abort", `{}`)
	if again["changed"] != false || !strings.Contains(again["message"].(string), "nothing to abort") {
		t.Fatalf("second abort: %v", again)
	}
	// The last job's end ended the experiment in the same write.
	if _, got := e.http(t, "GET", "/v1/experiments/"+id, ""); got["status"] != "Aborted" {
		t.Fatalf("experiment %v after its jobs were aborted, want Aborted", got["status"])
	}
	if code, body := e.http(t, "DELETE", "/v1/experiments/"+id, ""); code != 200 {
		t.Fatalf("delete: %d %v", code, body)
	}
	if code, _ := e.http(t, "GET", "/v1/experiments/"+id, ""); code != 404 {
		t.Fatalf("deleted exp still there: %d", code)
	}
	resp, _ := e.jobs.ListJobs(ctx, &falconv1.ListJobsRequest{ExpId: id})
	arts, _ := e.arts.ListArtifacts(ctx, &falconv1.ListArtifactsRequest{ExpId: id})
	if len(resp.GetItems()) != 0 || len(arts.GetItems()) != 0 {
		t.Fatal("delete left jobs or artifacts behind")
	}
}

func TestListPaginationAndFilters(t *testing.T) {
	e := start(t)
	for i := 0; i < 7; i++ {
		body := strings.Replace(twoRoles, `"name": "hello"`, fmt.Sprintf(`"name": "e%d"`, i), 1)
		if i%2 == 1 {
			body = strings.Replace(body, `"benchmark"`, `"profiling"`, 1)
		}
		if code, b := e.http(t, "POST", "/v1/experiments", body); code != 200 {
			t.Fatal(b)
		}
	}
	var names []string
	token := ""
	for pages := 0; ; pages++ {
		_, page := e.http(t, "GET", "/v1/experiments?page_size=3&page_token="+token, "")
		for _, it := range page["items"].([]any) {
			names = append(names, it.(map[string]any)["name"].(string))
		}
		token = page["next_page_token"].(string)
		if token == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if strings.Join(names, ",") != "e6,e5,e4,e3,e2,e1,e0" {
		t.Fatalf("pages gave %v, want newest first, each once", names)
	}
	_, f := e.http(t, "GET", "/v1/experiments?exp_type=profiling&status=created", "")
	if n := len(f["items"].([]any)); n != 3 {
		t.Fatalf("filter exp_type=profiling status=created: %d items, want 3", n)
	}
	if code, body := e.http(t, "GET", "/v1/experiments?status=Done", ""); code != 400 || !strings.Contains(body["message"].(string), "allowed") {
		t.Fatalf("bad status filter: %d %v", code, body)
	}
	if code, _ := e.http(t, "GET", "/v1/experiments?page_token=%25%25garbage", ""); code != 400 {
		t.Fatalf("bad token: %d, want 400", code)
	}
}

func TestLogsStream(t *testing.T) {
	e := start(t)
	_, exp := e.http(t, "POST", "/v1/experiments", twoRoles)
	id := exp["id"].(string)
	var worker string
	for _, j := range exp["jobs"].([]any) {
		if j := j.(map[string]any); j["role"] == "worker" {
			worker = j["id"].(string)
		}
	}
	long := strings.Repeat("x", 200<<10) // one 200 KiB line must arrive whole
	for rank, content := range []string{"r0 a\nr0 b\nr0 c\n", "r1 a\n" + long + "\nr1 last-no-newline"} {
		dir := filepath.Join(e.logDir, worker)
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", worker, rank)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(query string) []map[string]any {
		resp, err := http.Get(e.base + "/v1/experiments/" + id + "/logs?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []map[string]any
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var msg map[string]any
			if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
				t.Fatalf("bad stream line %q", sc.Text())
			}
			if msg["error"] != nil {
				out = append(out, map[string]any{"error": msg["error"]})
				continue
			}
			// Lines come in batches (LogLines); a test of lines reads them
			// one by one.
			for _, l := range msg["result"].(map[string]any)["lines"].([]any) {
				out = append(out, l.(map[string]any))
			}
		}
		return out
	}
	all := read("role=worker")
	if len(all) != 6 {
		t.Fatalf("got %d lines, want 6: %v", len(all), all)
	}
	if all[4]["line"] != long || all[5]["line"] != "r1 last-no-newline" || all[0]["rank"] != float64(0) || all[3]["rank"] != float64(1) {
		t.Fatalf("lines out of order or cut")
	}
	tail := read("role=worker&rank=0&tail=2")
	if len(tail) != 2 || tail[0]["line"] != "r0 b" || tail[1]["line"] != "r0 c" {
		t.Fatalf("tail=2 rank=0: %v", tail)
	}
	if bad := read("role=nope"); len(bad) != 1 || bad[0]["error"] == nil {
		t.Fatalf("unknown role: %v, want one error", bad)
	}
	// A rank no role has: the error says which ranks there are.
	if bad := read("rank=5"); len(bad) != 1 || !strings.Contains(fmt.Sprint(bad[0]["error"]), "no selected role has rank 5 (main has rank 0 only; worker has ranks 0 to 1)") {
		t.Fatalf("rank 5: %v, want one error naming the ranks", bad)
	}
}

func TestWatchChangesWakesOnCreate(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := e.jobs.WatchChanges(ctx, &falconv1.WatchChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the initial tick
		t.Fatal(err)
	}
	e.http(t, "POST", "/v1/experiments", twoRoles)
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("no change after create: %v", err)
	}
}
