package xpk_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	provider "github.com/falconhq/falcon/internal/provider/xpk"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
	"github.com/falconhq/falcon/internal/xpk"
	"github.com/falconhq/falcon/internal/xpk/xpktest"
)

func TestMain(m *testing.M) { xpktest.Main(m) }

func job(id string, env map[string]string) *falconv1.Job {
	return &falconv1.Job{Id: id, ExpId: "exp-aaaaaaaaaa", Role: "main", Priority: 1, TaskSpec: &falconv1.TaskSpec{
		Command: "python3 train.py", Replica: 2, Image: "gcr.io/team/jax:1", DeviceType: "v5p", DeviceTopo: "2x2x2", Envs: env,
	}}
}

// A job's whole life on an xpk cluster through the xpk double, whose
// workloads are real Jobs on a real kube-apiserver (kwok runs their pods):
// Dispatch creates it once however often it is asked, Observe follows the
// Job's real status, Stop deletes it and a second Stop is a warning.
func TestDispatchObserveStop(t *testing.T) {
	ctx := context.Background()
	kc := kubeenv.Start(t, kubeenv.WithName("xpk-edge"))
	if _, err := kc.AddNodes(ctx, 2, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "calls.jsonl")
	creds := xpk.Static{"FAKEXPK_KUBECONFIG=" + kc.KubeconfigPath(), "FAKEXPK_LOG=" + log}
	b := provider.New(xpk.New(), creds)
	cl := &falconv1.Cluster{Name: "tpu-xpk", Backend: "xpk", Project: "p", Location: "us-east5-a", GkeCluster: "tpu-xpk",
		XpkPath: xpktest.Binary(t), ExtraArgs: []string{"--spot"},
		Accelerators: []*falconv1.AcceleratorSlot{{Type: "v5p", Priority: 1, DeviceClass: "tpu"}}}

	waitPhase := func(t *testing.T, j *falconv1.Job, want resourcemanager.Phase) resourcemanager.Observation {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			obs, err := b.Observe(ctx, cl, j)
			if err != nil {
				t.Fatalf("Observe: %v", err)
			}
			if obs.Phase == want {
				return obs
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s is %s (%s), want %s", j.GetId(), obs.Phase, obs.Message, want)
			}
			time.Sleep(250 * time.Millisecond) // polling the real Job's status through xpk
		}
	}

	t.Run("succeeds", func(t *testing.T) {
		j := job("job-aaaaaaaaa1", map[string]string{"FALCON_TEST_DURATION": "3s"})
		if obs, err := b.Observe(ctx, cl, j); err != nil || obs.Phase != resourcemanager.PhaseUnknown {
			t.Fatalf("Observe before Dispatch = %+v, %v; want Unknown", obs, err)
		}
		for range 2 {
			if err := b.Dispatch(ctx, cl, j); err != nil {
				t.Fatalf("Dispatch: %v", err)
			}
		}
		creates := 0
		for _, args := range xpktest.Invocations(t, log) {
			if args[1] == "create" && strings.Contains(strings.Join(args, " "), "--workload=falcon-job-aaaaaaaaa1") {
				creates++
				joined := strings.Join(args, " ")
				for _, want := range []string{"--tpu-type=v5p-2x2x2", "--priority=high", "--env=FALCON_JOB_ID=job-aaaaaaaaa1", "--env=FALCON_WORLD_SIZE=2", "--docker-image=gcr.io/team/jax:1"} {
					if !strings.Contains(joined, want) {
						t.Errorf("create %q lacks %s", joined, want)
					}
				}
				if args[len(args)-1] != "--spot" {
					t.Errorf("create %q: want the cluster's extra args last", joined)
				}
			}
		}
		if creates != 1 {
			t.Errorf("%d creates for two dispatches, want 1", creates)
		}
		got, err := kc.Clientset().BatchV1().Jobs("default").Get(ctx, "falcon-job-aaaaaaaaa1-slice-job-0", metav1.GetOptions{})
		if err != nil || got.Labels["xpk.google.com/workload"] != "falcon-job-aaaaaaaaa1" {
			t.Fatalf("Job on the cluster: %v, %v; want one labelled as xpk labels its workloads", got.GetLabels(), err)
		}
		waitPhase(t, j, resourcemanager.PhaseRunning)
		obs := waitPhase(t, j, resourcemanager.PhaseSucceeded)
		if !strings.Contains(obs.Message, "JobSet finished successfully") {
			t.Errorf("message %q, want xpk's", obs.Message)
		}
	})

	t.Run("several slices run as one workload", func(t *testing.T) {
		j := job("job-aaaaaaaaa4", map[string]string{"FALCON_TEST_DURATION": "3s"})
		j.TaskSpec.Slices = 2
		if err := b.Dispatch(ctx, cl, j); err != nil {
			t.Fatal(err)
		}
		for _, args := range xpktest.Invocations(t, log) {
			if joined := strings.Join(args, " "); args[1] == "create" && strings.Contains(joined, "--workload=falcon-job-aaaaaaaaa4") {
				for _, want := range []string{"--num-slices=2", "--env=FALCON_WORLD_SIZE=4"} {
					if !strings.Contains(joined, want) {
						t.Errorf("create %q lacks %s", joined, want)
					}
				}
			}
		}
		for slice := range 2 {
			name := xpk.SliceJobName("falcon-job-aaaaaaaaa4", slice)
			got, err := kc.Clientset().BatchV1().Jobs("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("slice %d's Job %s: %v", slice, name, err)
			}
			env := map[string]string{}
			for _, e := range got.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if *got.Spec.Completions != 2 || env["MEGASCALE_SLICE_ID"] != strconv.Itoa(slice) || env["MEGASCALE_NUM_SLICES"] != "2" {
				t.Errorf("slice %d's Job: %d hosts, env %v; want 2 hosts and its MEGASCALE variables", slice, *got.Spec.Completions, env)
			}
		}
		waitPhase(t, j, resourcemanager.PhaseRunning)
		waitPhase(t, j, resourcemanager.PhaseSucceeded)
		if err := b.Stop(ctx, cl, j); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		for slice := range 2 {
			name := xpk.SliceJobName("falcon-job-aaaaaaaaa4", slice)
			if got, err := kc.Clientset().BatchV1().Jobs("default").Get(ctx, name, metav1.GetOptions{}); err == nil && got.DeletionTimestamp == nil {
				t.Errorf("slice %d's Job %s is still there after Stop", slice, name)
			}
		}
	})

	t.Run("fails with xpk's message", func(t *testing.T) {
		j := job("job-aaaaaaaaa2", map[string]string{"FALCON_TEST_DURATION": "1s", "FALCON_TEST_EXIT_CODE": "3"})
		if err := b.Dispatch(ctx, cl, j); err != nil {
			t.Fatal(err)
		}
		obs := waitPhase(t, j, resourcemanager.PhaseFailed)
		if !strings.Contains(obs.Message, "JobSet failed") {
			t.Errorf("message %q", obs.Message)
		}
	})

	t.Run("stopped", func(t *testing.T) {
		j := job("job-aaaaaaaaa3", map[string]string{"FALCON_TEST_RUN_FOREVER": "1"})
		if err := b.Dispatch(ctx, cl, j); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, j, resourcemanager.PhaseRunning)
		if err := b.Stop(ctx, cl, j); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		waitPhase(t, j, resourcemanager.PhaseUnknown)
		if err := b.Stop(ctx, cl, j); err != nil {
			t.Errorf("second Stop = %v; a workload already gone is a warning, not a failure", err)
		}
	})
}

func TestDispatchErrors(t *testing.T) {
	ctx := context.Background()
	cl := &falconv1.Cluster{Name: "tpu-xpk", Backend: "xpk", Project: "p", Location: "z", GkeCluster: "c", XpkPath: xpktest.Binary(t)}
	state := filepath.Join(t.TempDir(), "state.json")
	tests := []struct {
		name  string
		env   []string
		path  string
		check func(error) bool
	}{
		{"a create xpk refuses is final, with stderr", []string{"FAKEXPK_FAIL=1:ERROR: quota exceeded for TPU v5p", "FAKEXPK_FAIL_ON=create"}, "", func(err error) bool {
			var se *xpk.WorkloadSubmitError
			var re *resourcemanager.RetryableError
			return errors.As(err, &se) && !errors.As(err, &re) && strings.Contains(se.Stderr, "quota exceeded")
		}},
		{"a cluster that does not answer in time is retried", []string{"FAKEXPK_DELAY=5s"}, "", func(err error) bool {
			var re *resourcemanager.RetryableError
			return errors.As(err, &re)
		}},
		{"an xpk that cannot be run is unusable", nil, filepath.Join(t.TempDir(), "xpk"), func(err error) bool {
			var ue *resourcemanager.UnusableError
			return errors.As(err, &ue)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cl
			if tt.path != "" {
				c = &falconv1.Cluster{Name: "tpu-xpk", Backend: "xpk", Project: "p", Location: "z", GkeCluster: "c", XpkPath: tt.path}
			}
			b := provider.New(xpk.New(xpk.WithTimeout(time.Second)), xpk.Static(append([]string{"FAKEXPK_STATE=" + state}, tt.env...)))
			if err := b.Dispatch(ctx, c, job("job-bbbbbbbbb1", nil)); !tt.check(err) {
				t.Errorf("Dispatch = %v (%T)", err, err)
			}
		})
	}
	t.Run("unparseable output fails no job: Observe returns an error", func(t *testing.T) {
		b := provider.New(xpk.New(), xpk.Static{"FAKEXPK_STATE=" + state, "FAKEXPK_LIST_OUTPUT=garbage"})
		obs, err := b.Observe(ctx, cl, job("job-bbbbbbbbb1", nil))
		if err == nil || obs.Phase != "" {
			t.Errorf("Observe = %+v, %v; want an error and no phase", obs, err)
		}
	})
}

func TestObserveMapping(t *testing.T) {
	end := time.Date(2026, 12, 1, 9, 14, 0, 0, time.UTC)
	tests := []struct {
		st   xpk.WorkloadStatus
		want resourcemanager.Phase
		at   time.Time // an end's Status Time
	}{
		{xpk.WorkloadStatus{State: xpk.StateQueued, Status: "QuotaReserved"}, resourcemanager.PhasePending, time.Time{}},
		{xpk.WorkloadStatus{State: xpk.StateRunning, Status: "Admitted", EndTime: &end}, resourcemanager.PhaseRunning, time.Time{}},
		{xpk.WorkloadStatus{State: xpk.StateCompleted, Status: "Finished", EndTime: &end}, resourcemanager.PhaseSucceeded, end},
		{xpk.WorkloadStatus{State: xpk.StateCompleted, Status: "Finished"}, resourcemanager.PhaseSucceeded, time.Time{}},
		{xpk.WorkloadStatus{State: xpk.StateFailed, Status: "Finished", Message: "JobSet failed", EndTime: &end}, resourcemanager.PhaseFailed, end},
		{xpk.WorkloadStatus{State: xpk.StateUnknown, Status: "PodsReady"}, resourcemanager.PhaseRunning, time.Time{}},
		{xpk.WorkloadStatus{State: xpk.StateUnknown, Status: "Created"}, resourcemanager.PhasePending, time.Time{}},
	}
	for _, tt := range tests {
		if got := provider.Observe("w", tt.st); got.Phase != tt.want || !got.At.Equal(tt.at) {
			t.Errorf("Observe(%+v) = %s at %v, want %s at %v", tt.st, got.Phase, got.At, tt.want, tt.at)
		}
	}
}

func TestSpec(t *testing.T) {
	gpu := &falconv1.Job{Id: "job-cccccccccc", TaskSpec: &falconv1.TaskSpec{Command: "torchrun x.py", Replica: 2, Image: "img", DeviceType: "h100", DeviceCount: 8}}
	s, err := provider.Spec(&falconv1.Cluster{}, gpu)
	if err != nil {
		t.Fatal(err)
	}
	if s.AcceleratorType != "h100-80gb-8" || s.DeviceClass != xpk.ClassGPU || s.NumNodes != 2 || s.Priority != "medium" {
		t.Errorf("GPU spec %+v: want h100-80gb-8 by --device-type on 2 nodes", s)
	}
	multi := &falconv1.Job{Id: "job-dddddddddd", TaskSpec: &falconv1.TaskSpec{Command: "python train.py", Replica: 2, Image: "img", DeviceType: "v5p", DeviceTopo: "2x2x2", Slices: 4}}
	s, err = provider.Spec(&falconv1.Cluster{}, multi)
	if err != nil {
		t.Fatal(err)
	}
	if s.AcceleratorType != "v5p-2x2x2" || s.NumSlices != 4 || s.Env["FALCON_WORLD_SIZE"] != "8" {
		t.Errorf("multi-slice spec %+v: want 4 slices of v5p-2x2x2 and a world of 8 hosts", s)
	}
	if _, err := provider.Spec(&falconv1.Cluster{}, &falconv1.Job{TaskSpec: &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: "v5p", DeviceTopo: "2x2x1"}}); err == nil {
		t.Error("a task without an image was accepted")
	}
}
