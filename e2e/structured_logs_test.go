package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"syscall"
	"testing"
)

// TestStructuredLogs runs `falcon dev` with FALCON_LOG_FORMAT=json, as
// production runs the server and controllers: every line is one JSON
// object; a job's status changes carry the job, experiment and cluster;
// the experiment's status changes carry the experiment; and every call is
// logged with its method, caller, code and duration.
func TestStructuredLogs(t *testing.T) {
	d := startDevEnv(t, "", []string{"FALCON_LOG_FORMAT=json"})
	exp := d.create("name: logged\nrole_to_task_spec:\n  main:\n    command: 'echo hi'\n    replica: 1\n")
	id := exp["id"].(string)
	d.waitFor(id, "Succeeded", func(e map[string]any) bool { return e["status"] == "Succeeded" })
	jobID := jobsOf(exp)[0]["id"].(string)
	d.kill(syscall.SIGTERM)

	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(d.stderr.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	find := func(what string, ok func(map[string]any) bool) map[string]any {
		t.Helper()
		for _, m := range lines {
			if ok(m) {
				return m
			}
		}
		t.Fatalf("no log line %s among %d", what, len(lines))
		return nil
	}
	for _, to := range []string{"Running", "Succeeded"} {
		m := find("job status to "+to, func(m map[string]any) bool {
			return m["msg"] == "job status" && m["job"] == jobID && m["to"] == to
		})
		if m["exp"] != id || m["cluster"] != "local" || m["level"] != "INFO" {
			t.Errorf("job status line %v: want exp %s, cluster local, level INFO", m, id)
		}
	}
	m := find("experiment status to Succeeded", func(m map[string]any) bool {
		return m["msg"] == "experiment status" && m["exp"] == id && m["to"] == "Succeeded"
	})
	if m["cluster"] != "local" {
		t.Errorf("experiment status line %v: want cluster local", m)
	}
	m = find("a request log of CreateExp", func(m map[string]any) bool {
		return m["msg"] == "request" && m["method"] == "/falcon.v1.ExperimentService/CreateExp"
	})
	if m["code"] != "OK" || m["caller"] == "" || m["duration"] == nil || m["from"] == "" {
		t.Errorf("request line %v: want code OK, a caller, from and duration", m)
	}
}
