package gke_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	container "google.golang.org/api/container/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// GPU jobs go through the node pools' lifecycle as TPU jobs do, on the same
// shared kube cluster: reservation first, flex-start when it is full, an
// idle pool reused only by a job of its shape, deletion once idle.

const h100 = "nvidia-h100-80gb"

// gpuTask is a job of hosts H100 hosts with gpus GPUs each, whose pods run
// for d (forever when d is 0).
func gpuTask(d time.Duration, gpus, hosts int) *falconv1.TaskSpec {
	ts := task(d)
	ts.DeviceType, ts.DeviceTopo, ts.DeviceCount, ts.Replica = h100, "", int32(gpus), int32(hosts)
	return ts
}

func (f *fixture) abort(id string) {
	f.t.Helper()
	exp := f.api.Job(f.t, id).GetExpId()
	if _, err := falconv1.NewExperimentServiceClient(f.api.UserConn).AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp}); err != nil {
		f.t.Fatal(err)
	}
}

// checkGPUPool checks what GKE was asked for and what the job's pods got:
// the pool's machine type and acceleratorConfig, its nodes labelled,
// tainted and sized as GKE's GPU nodes are, and every pod of the job
// requesting the GPUs on one of them.
func (f *fixture) checkGPUPool(id, pool, machine string, gpus int64) {
	f.t.Helper()
	np, ok := f.fake.Pool(pool)
	if !ok {
		f.t.Fatalf("pool %s does not exist", pool)
	}
	want := []*container.AcceleratorConfig{{AcceleratorType: h100, AcceleratorCount: gpus,
		GpuDriverInstallationConfig: &container.GPUDriverInstallationConfig{GpuDriverVersion: "LATEST"}}}
	if diff := cmp.Diff(want, np.Config.Accelerators); diff != "" || np.Config.MachineType != machine {
		f.t.Errorf("pool %s: machine %s (want %s), accelerators (-want +got):\n%s", pool, np.Config.MachineType, machine, diff)
	}
	nodes, err := f.join.Nodes(context.Background(), pool)
	if err != nil {
		f.t.Fatal(err)
	}
	onPool := map[string]bool{}
	for _, n := range nodes {
		onPool[n.Name] = true
		for k, v := range map[string]string{
			"cloud.google.com/gke-accelerator":        h100,
			"cloud.google.com/gke-nodepool":           pool,
			"cloud.google.com/gke-gpu-driver-version": "latest",
		} {
			if n.Labels[k] != v {
				f.t.Errorf("node %s: label %s=%q, want %q", n.Name, k, n.Labels[k], v)
			}
		}
		if c, a := n.Status.Capacity["nvidia.com/gpu"], n.Status.Allocatable["nvidia.com/gpu"]; c.Value() != gpus || a.Value() != gpus {
			f.t.Errorf("node %s: nvidia.com/gpu capacity %s allocatable %s, want %d", n.Name, c.String(), a.String(), gpus)
		}
		tainted := false
		for _, t := range n.Spec.Taints {
			tainted = tainted || (t.Key == "nvidia.com/gpu" && t.Effect == corev1.TaintEffectNoSchedule)
		}
		if !tainted {
			f.t.Errorf("node %s: no nvidia.com/gpu NoSchedule taint in %v", n.Name, n.Spec.Taints)
		}
	}
	pods, err := shared.Clientset().CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + id})
	if err != nil || len(pods.Items) == 0 {
		f.t.Fatalf("pods of %s: %d, %v", id, len(pods.Items), err)
	}
	for _, p := range pods.Items {
		if !onPool[p.Spec.NodeName] {
			f.t.Errorf("pod %s on node %q, not on pool %s", p.Name, p.Spec.NodeName, pool)
		}
		req := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
		if req.Value() != gpus {
			f.t.Errorf("pod %s requests %s nvidia.com/gpu, want %d", p.Name, req.String(), gpus)
		}
	}
}

// TestGPUPoolsReservationThenFlexStart: the reservation holds one 8-GPU
// host. The first H100 job gets its pool from it; the second, while the
// first still runs, finds it full and falls back to flex-start.
func TestGPUPoolsReservationThenFlexStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{reservation: &[2]int64{1, 0}, accelerators: []string{h100}})
	a := f.submit(gpuTask(0, 8, 1))
	ja := f.waitJob(a, "provisioning", reason("Provisioning"))
	if !strings.Contains(ja.GetMessage(), "from reservation projects/proj/zones/us-central1-a/reservations/res-1 (1 of 1 nodes free, 1 needed)") {
		t.Errorf("first job: %q", ja.GetMessage())
	}
	if np, _ := f.fake.Pool(ja.GetNodePool()); np.Config == nil || np.Config.ReservationAffinity == nil || np.Config.FlexStart {
		t.Errorf("first pool is not the reservation's: %+v", np.Config)
	}
	ja = f.waitJob(a, "running", status("Running"))
	f.checkGPUPool(a, ja.GetNodePool(), "a3-highgpu-8g", 8)

	b := f.submit(gpuTask(0, 8, 1))
	jb := f.waitJob(b, "provisioning on flex-start", reason("ProvisioningFallback"))
	if !strings.Contains(jb.GetMessage(), "has 0 of 1 nodes free, 1 needed") {
		t.Errorf("fallback message %q", jb.GetMessage())
	}
	if np, _ := f.fake.Pool(jb.GetNodePool()); np.Config == nil || !np.Config.FlexStart || np.Config.ReservationAffinity != nil {
		t.Errorf("fallback pool is not flex-start: %+v", np.Config)
	}
	jb = f.waitJob(b, "running", status("Running"))
	f.checkGPUPool(b, jb.GetNodePool(), "a3-highgpu-8g", 8)

	f.abort(a)
	f.abort(b)
	f.waitJob(a, "aborted", status("Aborted"))
	f.waitJob(b, "aborted", status("Aborted"))
	f.waitPoolGone(ja.GetNodePool())
	f.waitPoolGone(jb.GetNodePool())
	if _, inUse, _ := f.fake.Reservation(itProject, itZone, "res-1"); inUse != 0 {
		t.Errorf("reservation in use %d after both pools went, want 0", inUse)
	}
}

// gpuLinger is how long an idle pool is kept for a job of its shape in the
// reuse tests: long enough for the next job to be submitted and placed.
const gpuLinger = 8 * time.Second

// TestIdleGPUPoolNotReusedByAnotherGPUCount: a 4-GPU job arriving while an
// 8-GPU pool of the same GPU type lingers idle creates its own pool
// (a3-highgpu-4g), and each pool is deleted once it has been idle for the
// delay.
func TestIdleGPUPoolNotReusedByAnotherGPUCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{accelerators: []string{h100}, rmOpts: []resourcemanager.Option{resourcemanager.WithPoolLinger(gpuLinger)}})
	a := f.submit(gpuTask(time.Second, 8, 1))
	ja := f.waitJob(a, "succeeded", status("Succeeded"))
	p8 := ja.GetNodePool()

	c := f.submit(gpuTask(time.Second, 4, 1))
	jc := f.waitJob(c, "running", status("Running"))
	if jc.GetNodePool() == p8 {
		t.Fatalf("the 4-GPU job took the idle 8-GPU pool %s", p8)
	}
	if _, ok := f.fake.Pool(p8); !ok {
		t.Fatalf("the idle pool %s went before the delay; the test proves nothing", p8)
	}
	f.checkGPUPool(c, jc.GetNodePool(), "a3-highgpu-4g", 4)
	jc = f.waitJob(c, "succeeded", status("Succeeded"))
	ended := time.Now()
	f.waitPoolGone(jc.GetNodePool())
	// Deleted once idle for the delay, not at once (the job's end was seen
	// up to a poll late, hence the second's slack).
	if idle := time.Since(ended); idle < gpuLinger-time.Second {
		t.Errorf("pool %s deleted %s after its job ended, before the %s delay", jc.GetNodePool(), idle.Round(time.Millisecond), gpuLinger)
	}
	f.waitPoolGone(p8)
	if n := f.creates(); n != 2 {
		t.Errorf("%d creates for an 8-GPU and a 4-GPU job, want 2", n)
	}
}

// TestIdleGPUPoolReusedBySameShape: the next 8-GPU job runs on the idle
// 8-GPU pool instead of creating one.
func TestIdleGPUPoolReusedBySameShape(t *testing.T) {
	t.Parallel()
	// The pool's shape is 1x8gpu (accelerator.Slice.PoolShape), and the
	// resource manager gives the job the same (placement.PoolShape); were it
	// the job's device_topo, empty for a GPU, no GPU pool would match.
	f := newFixture(t, setup{accelerators: []string{h100}, rmOpts: []resourcemanager.Option{resourcemanager.WithPoolLinger(gpuLinger)}})
	a := f.submit(gpuTask(time.Second, 8, 1))
	ja := f.waitJob(a, "succeeded", status("Succeeded"))
	b := f.submit(gpuTask(0, 8, 1))
	jb := f.waitJob(b, "running", status("Running"))
	if jb.GetNodePool() != ja.GetNodePool() {
		t.Errorf("the second 8-GPU job runs on %s, not on the idle pool %s", jb.GetNodePool(), ja.GetNodePool())
	}
	f.checkGPUPool(b, jb.GetNodePool(), "a3-highgpu-8g", 8)
	f.abort(b)
	f.waitJob(b, "aborted", status("Aborted"))
	f.waitPoolGone(jb.GetNodePool())
	if n := f.creates(); n != 1 {
		t.Errorf("%d creates for two 8-GPU jobs in a row, want 1", n)
	}
}
