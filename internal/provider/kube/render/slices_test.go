package render

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A task of two v7x 2x2x4 slices: one Indexed Job per slice, each pinned
// to its own pool of the group, the ranks numbered across slices, and
// the variables JAX multislice reads.
func TestRenderMultislice(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.Slices = 2
	in := input(j)
	in.NodePool = "falcon-job-abc123xyz0"
	objs := render(t, in)

	if len(objs.Jobs) != 2 {
		t.Fatalf("%d Jobs, want one per slice", len(objs.Jobs))
	}
	if objs.Service == nil || objs.Service.Name != jobID {
		t.Fatalf("Service = %v, want the headless Service %s over both slices", objs.Service, jobID)
	}
	for s, job := range objs.Jobs {
		name := fmt.Sprintf("%s-s%d", jobID, s)
		if job.Name != name {
			t.Errorf("slice %d Job named %s, want %s", s, job.Name, name)
		}
		if c := *job.Spec.Completions; c != 4 {
			t.Errorf("slice %d: %d completions, want the slice's 4 hosts", s, c)
		}
		tmpl := job.Spec.Template
		want := wantLabels()
		want["falcon.dev/slice"] = fmt.Sprint(s)
		want["falcon.dev/first-rank"] = fmt.Sprint(4 * s)
		if diff := cmp.Diff(want, tmpl.Labels); diff != "" {
			t.Errorf("slice %d pod labels (-want +got):\n%s", s, diff)
		}
		if diff := cmp.Diff(want, job.Labels); diff != "" {
			t.Errorf("slice %d Job labels (-want +got):\n%s", s, diff)
		}
		if got, want := tmpl.Spec.NodeSelector["cloud.google.com/gke-nodepool"], fmt.Sprintf("falcon-job-abc123xyz0-s%d", s); got != want {
			t.Errorf("slice %d pinned to pool %q, want %q", s, got, want)
		}
		if tmpl.Spec.Subdomain != jobID {
			t.Errorf("slice %d subdomain %q, want the Service's %s", s, tmpl.Spec.Subdomain, jobID)
		}
		env := envMap(tmpl.Spec.Containers[0].Env)
		for k, v := range map[string]string{
			"FALCON_WORLD_SIZE":             "8",
			"JAX_COORDINATOR_ADDRESS":       jobID + "-s0-0." + jobID + ":8476",
			"JAX_NUM_PROCESSES":             "8",
			"MEGASCALE_COORDINATOR_ADDRESS": jobID + "-s0-0." + jobID + ":8081",
			"MEGASCALE_PORT":                "8081",
			"MEGASCALE_NUM_SLICES":          "2",
			"MEGASCALE_SLICE_ID":            fmt.Sprint(s),
		} {
			if env[k].Value != v {
				t.Errorf("slice %d: %s = %q, want %q", s, k, env[k].Value, v)
			}
		}
		if diff := cmp.Diff(rankEnv("JAX_PROCESS_ID"), env["JAX_PROCESS_ID"]); diff != "" {
			t.Errorf("slice %d: JAX_PROCESS_ID starts as the index, for the prelude to add the slice's first rank (-want +got):\n%s", s, diff)
		}
	}
}

// One slice renders exactly as before: no slice labels, no MEGASCALE.
func TestRenderOneSliceHasNoMultisliceParts(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.Slices = 1
	objs := render(t, input(j))
	if len(objs.Jobs) != 1 || objs.Jobs[0].Name != jobID {
		t.Fatalf("Jobs = %d (first %s), want one named %s", len(objs.Jobs), objs.Jobs[0].Name, jobID)
	}
	tmpl := objs.Jobs[0].Spec.Template
	if diff := cmp.Diff(wantLabels(), tmpl.Labels); diff != "" {
		t.Errorf("pod labels (-want +got):\n%s", diff)
	}
	if tmpl.Spec.NodeSelector["cloud.google.com/gke-nodepool"] != "falcon-v7x-2x2x4-a" {
		t.Errorf("pool %q, want the job's own", tmpl.Spec.NodeSelector["cloud.google.com/gke-nodepool"])
	}
	for _, e := range tmpl.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "MEGASCALE_") {
			t.Errorf("one slice sets %s", e.Name)
		}
	}
}

// unescape undoes literal, as the kubelet does.
func unescape(s string) string { return strings.ReplaceAll(s, "$$", "$") }

// The container's arguments of a multi-slice job run under the real
// /bin/sh as in a pod: the task sees its rank across slices.
func TestMultisliceRankUnderShell(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.Slices, j.TaskSpec.Command = 3, `echo "rank=$FALCON_RANK jax=$JAX_PROCESS_ID slice=$MEGASCALE_SLICE_ID"`
	in := input(j)
	in.Bucket = "" // no log wrapper: its log dir is the GCS mount
	objs := render(t, in)
	for s, job := range objs.Jobs {
		c := job.Spec.Template.Spec.Containers[0]
		for index := range 4 {
			args := append([]string{"-c"}, c.Args...)
			for i := range args {
				args[i] = unescape(args[i])
			}
			cmd := exec.Command("/bin/sh", args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("FALCON_RANK=%d", index), fmt.Sprintf("JAX_PROCESS_ID=%d", index), fmt.Sprintf("MEGASCALE_SLICE_ID=%d", s)}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("slice %d index %d: %v: %s", s, index, err, out)
			}
			if want := fmt.Sprintf("rank=%d jax=%d slice=%d\n", 4*s+index, 4*s+index, s); string(out) != want {
				t.Errorf("slice %d index %d printed %q, want %q", s, index, out, want)
			}
		}
	}
}

// With the log wrapper, the rank's log file is named after its rank across
// slices, which is the object name logs are read back from (LogObject).
func TestMultisliceLogFileNamedByRank(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.Slices = 2
	r := renderer{job: j, task: j.TaskSpec, id: jobID, replica: 4, slices: 2}
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", r.rankPrelude(1)+logWrapper(dir, time.Second), "falcon-task", "echo hello")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "FALCON_JOB_ID=" + jobID, "FALCON_RANK=3"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := filepath.Join(dir, strings.TrimPrefix(LogObject(jobID, 7), "logs/"+jobID+"/"))
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatalf("rank 7's log: %v", err)
	}
	if string(b) != "hello\n" {
		t.Errorf("log = %q", b)
	}
}
