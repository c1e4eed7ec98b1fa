package xpk_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/xpk"
	"github.com/falconhq/falcon/internal/xpk/xpktest"
)

func TestMain(m *testing.M) { xpktest.Main(m) }

// fakeCluster is a cluster whose xpk is the test double, keeping its
// workloads in a state file and logging every call.
func fakeCluster(t *testing.T, env ...string) (xpk.Cluster, string, string) {
	t.Helper()
	dir := t.TempDir()
	state, log := filepath.Join(dir, "state.json"), filepath.Join(dir, "calls.jsonl")
	return xpk.Cluster{
		Name: "tpu-v5p-prod", ClusterID: "tpu-cluster", Project: "primatrix-tpu", Zone: "us-east5-a",
		DefaultNamespace: "default", Path: xpktest.Binary(t),
		Env: append([]string{"FAKEXPK_STATE=" + state, "FAKEXPK_LOG=" + log}, env...),
	}, state, log
}

func tpuSpec() xpk.WorkloadSpec {
	return xpk.WorkloadSpec{
		Name: "falcon-job-abc", DockerImage: "gcr.io/team/jax:1", Command: []string{"python3", "train.py", "--steps=10"},
		AcceleratorType: "v5p-2x2x4", DeviceClass: xpk.ClassTPU, Priority: "high",
		Env: map[string]string{"B": "2", "A": "1"}, ExtraArgs: []string{"--spot", "--max-restarts", "3"},
	}
}

// Design 001, acceptance table 4 (XpkWorkloadManager), one subtest per row.
func TestXpkWorkloadManager(t *testing.T) {
	ctx := context.Background()
	m := xpk.New(xpk.WithClock(func() time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) }))

	t.Run("提交任务 submit builds create with image, command, accelerator, env and extra args", func(t *testing.T) {
		c, _, log := fakeCluster(t)
		h, err := m.Submit(ctx, c, tpuSpec())
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"workload", "create", "--cluster=tpu-cluster", "--project=primatrix-tpu", "--zone=us-east5-a",
			"--workload=falcon-job-abc", "--docker-image=gcr.io/team/jax:1", "--command=python3 train.py --steps=10",
			"--tpu-type=v5p-2x2x4", "--priority=high", "--namespace=default", "--env=A=1", "--env=B=2",
			"--spot", "--max-restarts", "3"}
		calls := xpktest.Invocations(t, log)
		if len(calls) != 1 {
			t.Fatalf("%d calls, want 1: %v", len(calls), calls)
		}
		if diff := cmp.Diff(want, calls[0]); diff != "" {
			t.Errorf("xpk arguments (-want +got):\n%s", diff)
		}
		wantH := xpk.WorkloadHandle{WorkloadName: "falcon-job-abc", Cluster: "tpu-v5p-prod", Namespace: "default", SubmittedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
		if diff := cmp.Diff(wantH, h); diff != "" {
			t.Errorf("handle (-want +got):\n%s", diff)
		}
		// The workload now exists, queued: the double took the command as
		// xpk's parser would and recorded it.
		st, err := m.Status(ctx, c, h)
		if err != nil || st.State != xpk.StateQueued {
			t.Errorf("Status after submit = %+v, %v; want QUEUED", st, err)
		}
	})

	t.Run("TPU vs GPU --tpu-type for tpu, --device-type for gpu", func(t *testing.T) {
		for _, tc := range []struct {
			class, typ, want, absent string
		}{
			{xpk.ClassTPU, "v5p-2x2x4", "--tpu-type=v5p-2x2x4", "--device-type"},
			{xpk.ClassGPU, "h100-80gb-8", "--device-type=h100-80gb-8", "--tpu-type"},
		} {
			c, _, log := fakeCluster(t)
			s := tpuSpec()
			s.DeviceClass, s.AcceleratorType, s.ExtraArgs = tc.class, tc.typ, nil
			if _, err := m.Submit(ctx, c, s); err != nil {
				t.Fatalf("%s: %v", tc.class, err)
			}
			args := strings.Join(xpktest.Invocations(t, log)[0], " ")
			if !strings.Contains(args, tc.want) || strings.Contains(args, tc.absent) {
				t.Errorf("%s: args %q, want %s and no %s", tc.class, args, tc.want, tc.absent)
			}
		}
		if _, err := xpk.CreateArgs(xpk.Cluster{}, xpk.WorkloadSpec{Name: "w", DeviceClass: "fpga", AcceleratorType: "x"}); err == nil {
			t.Error("device class fpga accepted")
		}
	})

	t.Run("提交失败 a non-zero exit is a WorkloadSubmitError with stderr", func(t *testing.T) {
		c, _, _ := fakeCluster(t, "FAKEXPK_FAIL=1:ERROR: (gcloud.container.clusters.get-credentials) ResponseError: code=403, message=Required \"container.clusters.get\" permission")
		_, err := m.Submit(ctx, c, tpuSpec())
		var se *xpk.WorkloadSubmitError
		if !errors.As(err, &se) {
			t.Fatalf("Submit = %v, want a *WorkloadSubmitError", err)
		}
		if se.ExitCode != 1 || !strings.Contains(se.Stderr, `Required "container.clusters.get" permission`) {
			t.Errorf("error %+v: want exit 1 and gcloud's stderr", se)
		}
	})

	t.Run("提交失败 arguments xpk's parser refuses exit 2 with its usage", func(t *testing.T) {
		c, _, _ := fakeCluster(t)
		s := tpuSpec()
		s.ExtraArgs = []string{"--no-such-flag"}
		_, err := m.Submit(ctx, c, s)
		var se *xpk.WorkloadSubmitError
		if !errors.As(err, &se) || se.ExitCode != 2 || !strings.Contains(se.Stderr, "unrecognized arguments: --no-such-flag") {
			t.Errorf("Submit = %v, want exit 2 naming the flag", err)
		}
	})

	t.Run("查询状态 status maps xpk's list as xpk's filters do", func(t *testing.T) {
		c, state, _ := fakeCluster(t)
		xpktest.WriteState(t, state, map[string]xpktest.Row{
			"w-queued":    {Created: "2026-12-01T09:00:00Z", Priority: "medium", Needed: "4", Status: "QuotaReserved", Message: "couldn't assign flavors to pod set slice-job", StatusTime: "2026-12-01T09:00:01Z"},
			"w-admitted":  {Created: "2026-12-01T09:01:00Z", Priority: "medium", Needed: "4", Status: "Admitted", Message: "Admitted by ClusterQueue cluster-queue", StatusTime: "2026-12-01T09:01:01Z"},
			"w-running":   {Created: "2026-12-01T09:02:00Z", Priority: "high", Needed: "4", Running: "4", Status: "Admitted", Message: "Admitted by ClusterQueue cluster-queue", StatusTime: "2026-12-01T09:02:01Z"},
			"w-evicted":   {Created: "2026-12-01T09:03:00Z", Priority: "low", Needed: "4", Running: "0", Status: "Evicted", Message: "Preempted to accommodate a higher priority Workload", StatusTime: "2026-12-01T09:03:01Z"},
			"w-succeeded": {Created: "2026-12-01T09:04:00Z", Priority: "medium", Needed: "4", Running: "4", Done: "4", Status: "Finished", Message: "JobSet finished successfully", StatusTime: "2026-12-01T09:14:00Z"},
			"w-failed":    {Created: "2026-12-01T09:05:00Z", Priority: "medium", Needed: "4", Running: "4", Status: "Finished", Message: "JobSet failed", StatusTime: "2026-12-01T09:06:00Z"},
			"w-ready":     {Created: "2026-12-01T09:06:00Z", Priority: "medium", Needed: "4", Running: "4", Status: "PodsReady", Message: "All pods were ready or succeeded", StatusTime: "2026-12-01T09:06:30Z"},
		})
		for name, want := range map[string]xpk.State{
			"w-queued": xpk.StateQueued, "w-admitted": xpk.StateQueued, "w-running": xpk.StateRunning, "w-evicted": xpk.StateQueued,
			"w-succeeded": xpk.StateCompleted, "w-failed": xpk.StateFailed, "w-ready": xpk.StateUnknown,
		} {
			st, err := m.Status(ctx, c, xpk.WorkloadHandle{WorkloadName: name})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if st.State != want {
				t.Errorf("%s: state %s, want %s", name, st.State, want)
			}
		}
		done, err := m.Status(ctx, c, xpk.WorkloadHandle{WorkloadName: "w-succeeded"})
		if err != nil || done.StartTime == nil || done.EndTime == nil || done.EndTime.Format(time.RFC3339) != "2026-12-01T09:14:00Z" {
			t.Errorf("finished status %+v, %v: want start and end times from Created and Status Time", done, err)
		}
		// --filter-by-job matches by substring; the exact name is picked.
		if _, err := m.Status(ctx, c, xpk.WorkloadHandle{WorkloadName: "w"}); !errors.As(err, new(*xpk.WorkloadNotFoundError)) {
			t.Errorf("Status of w (a prefix of every name) = %v, want WorkloadNotFoundError", err)
		}
		queued, err := m.List(ctx, c, xpk.StateQueued)
		if err != nil || len(queued) != 3 {
			t.Errorf("List(QUEUED) = %d workloads, %v; want 3", len(queued), err)
		}
	})

	t.Run("取消任务 cancel runs delete and returns true", func(t *testing.T) {
		c, _, log := fakeCluster(t)
		h, err := m.Submit(ctx, c, tpuSpec())
		if err != nil {
			t.Fatal(err)
		}
		ok, err := m.Cancel(ctx, c, h)
		if !ok || err != nil {
			t.Fatalf("Cancel = %v, %v; want true", ok, err)
		}
		calls := xpktest.Invocations(t, log)
		want := []string{"workload", "delete", "--cluster=tpu-cluster", "--project=primatrix-tpu", "--zone=us-east5-a", "--workload=falcon-job-abc"}
		if diff := cmp.Diff(want, calls[len(calls)-1]); diff != "" {
			t.Errorf("delete arguments (-want +got):\n%s", diff)
		}
		if _, err := m.Status(ctx, c, h); !errors.As(err, new(*xpk.WorkloadNotFoundError)) {
			t.Errorf("Status after cancel = %v, want WorkloadNotFoundError", err)
		}
	})

	t.Run("取消不存在的任务 cancel of a missing workload is a WorkloadNotFoundError", func(t *testing.T) {
		c, _, _ := fakeCluster(t)
		ok, err := m.Cancel(ctx, c, xpk.WorkloadHandle{WorkloadName: "never-made"})
		var nf *xpk.WorkloadNotFoundError
		if ok || !errors.As(err, &nf) || nf.Workload != "never-made" || !strings.Contains(nf.Detail, "NotFound") {
			t.Errorf("Cancel = %v, %v; want false and a WorkloadNotFoundError carrying kubectl's NotFound", ok, err)
		}
	})

	t.Run("namespace 默认值 a spec without namespace uses the cluster's default", func(t *testing.T) {
		for _, tc := range []struct {
			name, clusterNS, specNS, want string
		}{
			{"spec has none: the cluster's", "benchmark", "", "--namespace=benchmark"},
			{"the spec's wins", "benchmark", "team-a", "--namespace=team-a"},
			{"neither: no flag, as upstream xpk wants", "", "", ""},
		} {
			c, _, log := fakeCluster(t)
			c.DefaultNamespace = tc.clusterNS
			s := tpuSpec()
			s.Namespace = tc.specNS
			h, err := m.Submit(ctx, c, s)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got string
			for _, a := range xpktest.Invocations(t, log)[0] {
				if strings.HasPrefix(a, "--namespace") {
					got = a
				}
			}
			if got != tc.want || h.Namespace != strings.TrimPrefix(tc.want, "--namespace=") {
				t.Errorf("%s: flag %q, handle namespace %q; want %q", tc.name, got, h.Namespace, tc.want)
			}
		}
	})

	t.Run("extra_args 透传 extra args are appended verbatim at the end", func(t *testing.T) {
		c, _, log := fakeCluster(t)
		s := tpuSpec()
		s.ExtraArgs = []string{"--scheduler", "gke.io/topology-aware-auto", "--ttl-seconds-after-finished=600", "--restart-on-user-code-failure"}
		if _, err := m.Submit(ctx, c, s); err != nil {
			t.Fatal(err)
		}
		args := xpktest.Invocations(t, log)[0]
		if diff := cmp.Diff(s.ExtraArgs, args[len(args)-len(s.ExtraArgs):]); diff != "" {
			t.Errorf("tail of the command (-want +got):\n%s", diff)
		}
	})

	t.Run("num-slices only when asked", func(t *testing.T) {
		c, _, log := fakeCluster(t)
		s := tpuSpec()
		s.NumSlices, s.ExtraArgs = 2, nil
		if _, err := m.Submit(ctx, c, s); err != nil {
			t.Fatal(err)
		}
		if args := xpktest.Invocations(t, log)[0]; args[len(args)-1] != "--num-slices=2" {
			t.Errorf("args %v: want --num-slices=2 last", args)
		}
	})
}

func TestListErrors(t *testing.T) {
	ctx := context.Background()
	m := xpk.New()
	t.Run("unparseable output says so", func(t *testing.T) {
		c, _, _ := fakeCluster(t, "FAKEXPK_LIST_OUTPUT=NAME STATUS\nfoo Running")
		_, err := m.List(ctx, c, "")
		var oe *xpk.OutputError
		if !errors.As(err, &oe) || !strings.Contains(oe.Error(), `lacks the column(s) "Jobset Name"`) {
			t.Errorf("List = %v, want an OutputError naming the missing columns", err)
		}
	})
	t.Run("a command failure carries stderr", func(t *testing.T) {
		c, _, _ := fakeCluster(t, "FAKEXPK_FAIL=1:Unable to connect to the server: dial tcp 10.0.0.2:443: i/o timeout")
		_, err := m.List(ctx, c, "")
		var ue *xpk.ClusterUnreachableError
		if !errors.As(err, &ue) || !strings.Contains(ue.Stderr, "Unable to connect to the server") {
			t.Errorf("List = %v, want a ClusterUnreachableError with stderr", err)
		}
	})
	t.Run("a timeout", func(t *testing.T) {
		c, _, _ := fakeCluster(t, "FAKEXPK_DELAY=10s")
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := m.List(ctx, c, "")
		var ue *xpk.ClusterUnreachableError
		if !errors.As(err, &ue) || !ue.TimedOut || !strings.Contains(err.Error(), "timed out after") {
			t.Errorf("List = %v, want a timed-out ClusterUnreachableError", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("List took %s: the killed xpk was waited for", d)
		}
	})
	t.Run("an xpk that does not exist", func(t *testing.T) {
		c, _, _ := fakeCluster(t)
		c.Path = filepath.Join(t.TempDir(), "xpk")
		_, err := m.List(ctx, c, "")
		var ue *xpk.ClusterUnreachableError
		if !errors.As(err, &ue) || ue.Err == nil {
			t.Errorf("List = %v, want a ClusterUnreachableError saying xpk could not run", err)
		}
	})
}
