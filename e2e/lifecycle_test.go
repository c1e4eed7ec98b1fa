package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
)

const twoRoleManifest = `
name: two-roles
exp_type: benchmark
config: |
  model: qwen/qwen3-32b
  max_concurrency: 64
role_to_task_spec:
  main:
    command: |
      echo "main rank $FALCON_RANK of $FALCON_WORLD_SIZE"
      echo "config=$CUSTOM_CONFIG_KEY"
      test "$FALCON_ARTIFACT_DIR" = "$ARTIFACT_LOCAL_DIR"
      echo '{"ok": true}' > "$FALCON_ARTIFACT_DIR/metrics.json"
    replica: 1
  worker:
    command: echo "worker rank $FALCON_RANK of $FALCON_WORLD_SIZE env=$MY_ENV"
    replica: 2
    envs:
      MY_ENV: hello
`

func TestTwoRoleExperimentSucceeds(t *testing.T) {
	d := startDev(t, "")
	exp := d.create(twoRoleManifest)
	id := exp["id"].(string)
	if exp["status"] != "Created" || len(jobsOf(exp)) != 2 {
		t.Fatalf("created: %v", exp)
	}
	r := d.run("", "exp", "wait", id, "--timeout", "60s", "-o", "json")
	if r.code != 0 {
		t.Fatalf("wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	exp = d.mustJSON("exp", "get", id)
	if exp["status"] != "Succeeded" || exp["finished_at"] == nil || exp["started_at"] == nil {
		t.Fatalf("exp: %v", exp)
	}
	for _, j := range jobsOf(exp) {
		if j["status"] != "Succeeded" {
			t.Errorf("job %v", j)
		}
	}
	art := exp["artifact"].(map[string]any)
	if art["status"] != "Succeeded" {
		t.Errorf("artifact %v", art)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimPrefix(art["path"].(string), "file://"), "metrics.json")); err != nil {
		t.Errorf("artifact file missing: %v", err)
	}

	logs := d.run("", "exp", "logs", id)
	if logs.code != 0 {
		t.Fatalf("logs: %d %s", logs.code, logs.stderr)
	}
	for _, want := range []string{
		"main rank 0 of 1", "config=model: qwen/qwen3-32b", "max_concurrency: 64",
		"worker rank 0 of 2 env=hello", "worker rank 1 of 2 env=hello",
	} {
		if !strings.Contains(logs.stdout, want) {
			t.Errorf("logs lack %q:\n%s", want, logs.stdout)
		}
	}
	one := d.run("", "exp", "logs", id, "--role", "worker", "--rank", "1")
	if !strings.Contains(one.stdout, "worker rank 1 of 2") || strings.Contains(one.stdout, "rank 0") {
		t.Errorf("--role worker --rank 1 gave:\n%s", one.stdout)
	}

	list := d.mustJSON("exp", "list", "--limit", "10")
	if items := list["items"].([]any); len(items) != 1 {
		t.Errorf("list: %v", list)
	}
	if _, ok := list["next_page_token"]; !ok {
		t.Error("list JSON lacks next_page_token")
	}
}

func TestFailingCommandFailsWithExitCode(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: fails\nrole_to_task_spec:\n  main:\n    command: echo about to fail; exit 3\n    replica: 1\n")
	id := exp["id"].(string)
	r := d.run("", "exp", "wait", id, "--timeout", "60s")
	if r.code != errdefs.ExitNotSucceeded {
		t.Fatalf("wait on a failed experiment exited %d, want %d", r.code, errdefs.ExitNotSucceeded)
	}
	exp = d.mustJSON("exp", "get", id)
	job := jobsOf(exp)[0]
	if exp["status"] != "Failed" || job["status"] != "Failed" || job["reason"] != "JobFailed" || !strings.Contains(job["message"].(string), "exited with code 3") {
		t.Fatalf("exp %v / job %v: want Failed, JobFailed, message with exit code 3", exp["status"], job)
	}
	if exp["reason"] != "JobFailed" {
		t.Errorf("experiment reason %v, want JobFailed", exp["reason"])
	}
	// falcon dev serves its controllers' metrics and readiness beside the API.
	for path, want := range map[string]string{
		"/metrics": `falcon_jobs_finished_total{cluster="local",reason="JobFailed",status="Failed"} 1`,
		"/readyz":  "ok",
	} {
		resp, err := http.Get("http://" + d.http + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, lacks %q", path, resp.StatusCode, want)
		}
	}
}

func TestAbortKillsProcesses(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: sleeper\nrole_to_task_spec:\n  main:\n    command: sleep 600 & sleep 600; wait\n    replica: 2\n")
	id := exp["id"].(string)
	jobID := jobsOf(exp)[0]["id"].(string)
	d.waitFor(id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	pids := d.pids(jobID)
	if len(pids) != 2 {
		t.Fatalf("want 2 process groups, found %v", pids)
	}
	r := d.run("", "exp", "abort", id, "--reason", "testing abort", "--yes")
	if r.code != 0 {
		t.Fatalf("abort: %d %s %s", r.code, r.stdout, r.stderr)
	}
	exp = d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	if exp["aborted_at"] == nil || !strings.Contains(exp["message"].(string), "testing abort") {
		t.Errorf("aborted exp: %v", exp)
	}
	if job := jobsOf(exp)[0]; job["status"] != "Aborted" || job["aborted_at"] == nil {
		t.Errorf("job: %v", job)
	}
	for _, p := range pids {
		if groupAlive(p) {
			t.Errorf("process group %d survived the abort", p)
		}
	}
	if r := d.run("", "exp", "wait", id, "--timeout", "10s"); r.code == 0 {
		t.Error("wait on an aborted experiment exited 0")
	}
	again := d.run("", "exp", "abort", id, "--yes")
	if again.code != 0 || !strings.Contains(again.stdout+again.stderr, "nothing") {
		t.Errorf("aborting a terminal experiment: exit %d, output %q; want a no-op that says so", again.code, again.stdout+again.stderr)
	}
	if r := d.run("", "exp", "delete", id, "--yes"); r.code != 0 {
		t.Fatalf("delete: %d %s", r.code, r.stderr)
	}
	if r := d.run("", "exp", "get", id); r.code != 3 {
		t.Errorf("get deleted: exit %d, want 3 (not found)", r.code)
	}
}

func TestTimeoutFailsWithReasonTimeout(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: slow\nrole_to_task_spec:\n  main:\n    command: sleep 600\n    replica: 1\n    timeout_seconds: 2\n")
	id := exp["id"].(string)
	jobID := jobsOf(exp)[0]["id"].(string)
	exp = d.waitFor(id, "Failed", func(e map[string]any) bool { return e["status"] == "Failed" })
	job := jobsOf(exp)[0]
	if job["reason"] != "Timeout" || exp["reason"] != "Timeout" {
		t.Fatalf("job %v exp reason %v: want Reason Timeout", job, exp["reason"])
	}
	for _, p := range d.pids(jobID) {
		if groupAlive(p) {
			t.Errorf("process group %d survived the timeout", p)
		}
	}
}

func TestOneRoleFailingAbortsTheOthers(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: half-broken\nrole_to_task_spec:\n  bad:\n    command: sleep 1; exit 1\n    replica: 1\n  good:\n    command: sleep 600\n    replica: 1\n")
	id := exp["id"].(string)
	exp = d.waitFor(id, "Failed", func(e map[string]any) bool { return e["status"] == "Failed" })
	for _, j := range jobsOf(exp) {
		switch j["role"] {
		case "bad":
			if j["status"] != "Failed" {
				t.Errorf("bad role: %v", j)
			}
		case "good":
			if j["status"] != "Aborted" || j["reason"] != nil && j["reason"] != "" || !strings.HasPrefix(fmt.Sprint(j["message"]), "stopped because role ") {
				t.Errorf("good role: %v, want Aborted with no reason and a message naming the failed role", j)
			}
			for _, p := range d.pids(j["id"].(string)) {
				if groupAlive(p) {
					t.Errorf("sibling's process group %d survived", p)
				}
			}
		}
	}
}

func TestBadManifestsAreRefused(t *testing.T) {
	d := startDev(t, "")
	tests := []struct{ name, manifest, field string }{
		{"malformed YAML", "name: [oops\n", "yaml"},
		{"unknown key", "name: a\nreplicas: 2\nrole_to_task_spec:\n  w:\n    command: x\n    replica: 1\n", "replicas"},
		{"unknown task key", "name: a\nrole_to_task_spec:\n  w:\n    command: x\n    replicas: 1\n", "role_to_task_spec.w.replicas"},
		{"missing name", "role_to_task_spec:\n  w:\n    command: x\n    replica: 1\n", "name"},
		{"missing roles", "name: a\n", "role_to_task_spec"},
		{"empty command", "name: a\nrole_to_task_spec:\n  w:\n    command: ''\n    replica: 1\n", "command"},
		{"replica zero", "name: a\nrole_to_task_spec:\n  w:\n    command: x\n    replica: 0\n", "replica"},
		{"negative timeout", "name: a\nrole_to_task_spec:\n  w:\n    command: x\n    replica: 1\n    timeout_seconds: -1\n", "timeout_seconds"},
		{"bad topology", "name: a\nrole_to_task_spec:\n  w:\n    command: x\n    replica: 1\n    device_topo: 2x2x2x2\n", "device_topo"},
		{"name not DNS-1123", "name: My_Exp\nrole_to_task_spec:\n  w:\n    command: x\n    replica: 1\n", "name"},
		{"config over 1 MiB", "name: a\nconfig: " + strings.Repeat("x", 1<<20+1) + "\nrole_to_task_spec:\n  w:\n    command: x\n    replica: 1\n", "config"},
		{"unknown cluster", "name: a\ncluster_name: mars\nrole_to_task_spec:\n  w:\n    command: x\n    replica: 1\n", "cluster_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "m.yaml")
			os.WriteFile(f, []byte(tt.manifest), 0o644)
			for _, verb := range []string{"create", "validate"} {
				r := d.run("", "exp", verb, "-f", f)
				if r.code != 2 {
					t.Errorf("exp %s: exit %d, want 2\n%s%s", verb, r.code, r.stdout, r.stderr)
				}
				if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(tt.field)) {
					t.Errorf("exp %s: error does not name %q: %s", verb, tt.field, r.stderr)
				}
			}
		})
	}
	list := d.mustJSON("exp", "list")
	if n := len(list["items"].([]any)); n != 0 {
		t.Fatalf("bad manifests created %d experiments", n)
	}
	if r := d.run("", "exp", "get", "exp-0000000000"); r.code != 3 {
		t.Errorf("unknown id: exit %d, want 3", r.code)
	}
}

func TestFlagFormCreate(t *testing.T) {
	d := startDev(t, "")
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.yaml")
	cfg := filepath.Join(dir, "profiling.yaml")
	os.WriteFile(tasks, []byte("main:\n  command: echo \"cfg=$CUSTOM_CONFIG_KEY\"\n  replica: 1\n"), 0o644)
	os.WriteFile(cfg, []byte("model: qwen/qwen3-32b\nrandom_input_len: 16384\n"), 0o644)
	exp := d.mustJSON("exp", "create", "--name", "model-profiling-001", "--cluster", "local", "--type", "profiling",
		"--role-to-task-spec", tasks, "--config", cfg)
	if exp["config"] != "model: qwen/qwen3-32b\nrandom_input_len: 16384\n" || exp["exp_type"] != "profiling" || exp["cluster_name"] != "local" {
		t.Fatalf("flag form: %v", exp)
	}
	id := exp["id"].(string)
	if r := d.run("", "exp", "wait", id, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait: %d %s", r.code, r.stderr)
	}
	logs := d.run("", "exp", "logs", id)
	if !strings.Contains(logs.stdout, "random_input_len: 16384") {
		t.Errorf("config not handed to the job:\n%s", logs.stdout)
	}
}

func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir)
	done := d.create("name: quick\nrole_to_task_spec:\n  main:\n    command: echo done\n    replica: 1\n")
	if r := d.run("", "exp", "wait", done["id"].(string), "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait quick: %d %s", r.code, r.stderr)
	}
	long := d.create("name: long\nrole_to_task_spec:\n  main:\n    command: sleep 600\n    replica: 1\n")
	longID := long["id"].(string)
	jobID := jobsOf(long)[0]["id"].(string)
	d.waitFor(longID, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	pids := d.pids(jobID)

	// A crash: the processes outlive it, and the restarted falcon adopts
	// them (restart_test.go checks how adopted jobs end).
	d.kill(syscall.SIGKILL)
	d2 := startDev(t, dir)
	if e := d2.mustJSON("exp", "get", done["id"].(string)); e["status"] != "Succeeded" {
		t.Fatalf("finished experiment after restart: %v", e["status"])
	}
	if e := d2.mustJSON("exp", "get", longID); e["status"] != "Running" {
		t.Fatalf("running experiment after restart: %v, want it adopted and Running", e["status"])
	}
	for _, p := range pids {
		if !liveInGroup(p) {
			t.Errorf("process group %d did not survive the restart", p)
		}
	}
	// An adopted job is stopped like any other.
	if r := d2.run("", "exp", "abort", longID, "--yes"); r.code != 0 {
		t.Fatalf("abort: exit %d %s", r.code, r.stderr)
	}
	d2.waitFor(longID, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	for _, p := range pids {
		if groupAlive(p) {
			t.Errorf("process group %d of the aborted job still runs", p)
		}
	}
	// And a clean stop keeps everything too.
	d2.kill(syscall.SIGTERM)
	d3 := startDev(t, dir)
	list := d3.mustJSON("exp", "list")
	if n := len(list["items"].([]any)); n != 2 {
		t.Fatalf("after restarts: %d experiments, want 2", n)
	}
	_ = time.Second
}

func TestLogsFollowUntilTheEnd(t *testing.T) {
	d := startDev(t, "")
	exp := d.create("name: chatty\nrole_to_task_spec:\n  main:\n    command: for i in 1 2 3 4 5; do echo line-$i; sleep 0.3; done\n    replica: 1\n")
	start := time.Now()
	r := d.run("", "exp", "logs", exp["id"].(string), "-f")
	if r.code != 0 {
		t.Fatalf("logs -f: exit %d %s", r.code, r.stderr)
	}
	for i := 1; i <= 5; i++ {
		if !strings.Contains(r.stdout, fmt.Sprintf("line-%d", i)) {
			t.Errorf("followed logs lack line-%d:\n%s", i, r.stdout)
		}
	}
	if time.Since(start) < time.Second {
		t.Errorf("logs -f returned after %s, before the job could have finished", time.Since(start))
	}
}
