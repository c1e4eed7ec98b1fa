package gke_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/testenv/fakegke"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// A multi-slice job on GKE: a node pool per slice, acquired as one group
// (one supply mode for all, ready when all are), one Kubernetes Job per
// slice pinned to its own pool, ended together, the group released
// together.

// sliceTask is task(d) over n slices.
func sliceTask(d time.Duration, n int32) *falconv1.TaskSpec {
	ts := task(d)
	ts.Slices = n
	return ts
}

// slicePods returns the job's pods by slice, failing unless each slice's
// pods run on the nodes of that slice's pool.
func (f *fixture) slicePods(id, group string, slices int) map[int][]corev1.Pod {
	f.t.Helper()
	pods, err := shared.Clientset().CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + id})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[int][]corev1.Pod{}
	for s := range slices {
		pool := placement.SlicePool(group, s)
		onPool := f.poolNodes(pool)
		for _, p := range pods.Items {
			if p.Labels[render.LabelSlice] != fmt.Sprint(s) {
				continue
			}
			if !onPool[p.Spec.NodeName] {
				f.t.Errorf("pod %s of slice %d on node %q, not on pool %s", p.Name, s, p.Spec.NodeName, pool)
			}
			out[s] = append(out[s], p)
		}
	}
	return out
}

func TestMultisliceJobOnAPoolGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{reservation: &[2]int64{8, 0}})
	id := f.submit(sliceTask(2*time.Second, 2))
	j := f.waitJob(id, "provisioning", reason("Provisioning"))
	group := j.GetNodePool()
	// One supply decision for both slices: the reservation holds all four hosts.
	if !strings.Contains(j.GetMessage(), "(8 of 8 nodes free, 4 needed)") && !strings.Contains(j.GetMessage(), "slice pools RUNNING") {
		t.Errorf("provisioning message %q", j.GetMessage())
	}
	for s := range 2 {
		np, ok := f.fake.Pool(placement.SlicePool(group, s))
		if !ok || np.InitialNodeCount != 2 || np.Config.ReservationAffinity == nil {
			t.Fatalf("slice %d pool of group %s: exists %v, %+v", s, group, ok, np)
		}
	}
	f.waitJob(id, "running", status("Running"))
	if n := f.kubeJobs(id); n != 2 {
		t.Errorf("%d Kubernetes Jobs, want one per slice", n)
	}
	pods := f.slicePods(id, group, 2)
	for s := range 2 {
		if len(pods[s]) != 2 {
			t.Errorf("slice %d has %d pods, want its 2 hosts", s, len(pods[s]))
		}
		for _, p := range pods[s] {
			env := map[string]string{}
			for _, e := range p.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if env["MEGASCALE_SLICE_ID"] != fmt.Sprint(s) || env["MEGASCALE_NUM_SLICES"] != "2" || env["FALCON_WORLD_SIZE"] != "4" {
				t.Errorf("pod %s of slice %d: MEGASCALE_SLICE_ID=%s NUM_SLICES=%s WORLD_SIZE=%s", p.Name, s,
					env["MEGASCALE_SLICE_ID"], env["MEGASCALE_NUM_SLICES"], env["FALCON_WORLD_SIZE"])
			}
		}
	}
	f.waitJob(id, "succeeded", status("Succeeded"))
	for s := range 2 {
		f.waitPoolGone(placement.SlicePool(group, s))
	}
	if _, inUse, _ := f.fake.Reservation(itProject, itZone, "res-1"); inUse != 0 {
		t.Errorf("reservation in use %d after the group went, want 0", inUse)
	}
}

// Without room for every slice in the reservation, the whole group goes
// to flex-start: no slice holds reservation capacity while another waits.
func TestMultisliceGroupFallsBackAsAWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{reservation: &[2]int64{8, 5}})
	id := f.submit(sliceTask(time.Second, 2))
	j := f.waitJob(id, "provisioning", func(j *falconv1.Job) bool { return j.GetNodePool() != "" })
	if j.GetReason() != "ProvisioningFallback" && !strings.Contains(j.GetMessage(), "slice pools RUNNING") {
		t.Errorf("job %s %q, want the group's fallback to flex-start", j.GetReason(), j.GetMessage())
	}
	for s := range 2 {
		np, ok := f.fake.Pool(placement.SlicePool(j.GetNodePool(), s))
		if !ok || !np.Config.FlexStart || np.Config.ReservationAffinity != nil {
			t.Errorf("slice %d pool: exists %v, flex-start %v", s, ok, ok && np.Config.FlexStart)
		}
	}
	f.waitJob(id, "succeeded", status("Succeeded"))
}

// One slice failing fails the job and stops every slice.
func TestMultisliceOneSliceFailingFailsTheJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{})
	id := f.submit(sliceTask(time.Hour, 2))
	j := f.waitJob(id, "running", status("Running"))
	pods := f.slicePods(id, j.GetNodePool(), 2)
	victim := pods[1][0]
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"3",%q:"0s"}}}`, kubeenv.AnnotationExitCode, kubeenv.AnnotationDuration)
	if _, err := shared.Clientset().CoreV1().Pods(f.ns).Patch(context.Background(), victim.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	j = f.waitJob(id, "failed", status("Failed"))
	if !strings.Contains(j.GetMessage(), "slice 1 of 2") || !strings.Contains(j.GetMessage(), victim.Name) {
		t.Errorf("message %q, want it to name slice 1 and pod %s", j.GetMessage(), victim.Name)
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.kubeJobs(id) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d Kubernetes Jobs left after one slice failed, want both slices stopped", f.kubeJobs(id))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for s := range 2 {
		f.waitPoolGone(placement.SlicePool(j.GetNodePool(), s))
	}
}

// A group that falls idle serves the next job of the same slice count, as
// a single pool does (TestWaitingJobReusesThePool): three jobs of two
// slices, the first's group idle while the second waits for its own and
// the third waits in the queue. Three jobs, two groups, four pool creates.
// On a loaded machine the first job may end before the second even starts
// to acquire: the second then takes the idle group, and so does the third
// after it, one group and two creates, which is reuse too. Three groups
// is the failure: no job took an idle one.
//
// When kwok loses the end of one of its pods (the cluster nudges it 15 s
// late, see kubeenv.StalledAfter), the first job ends after the second
// runs, and the third rightly gets a group of its own: such a run says
// nothing of reuse, and the scenario runs again on a fresh fixture.
func TestIdleGroupReusedBySameSliceCount(t *testing.T) {
	t.Parallel()
	for try := 1; ; try++ {
		nudged := shared.Nudged()
		f := newFixture(t, setup{createLatency: 3 * time.Second})
		var ids []string
		for range 3 {
			ids = append(ids, f.submit(sliceTask(time.Second, 2)))
		}
		groups := map[string]int{}
		for _, id := range ids {
			groups[f.waitJob(id, "succeeded", status("Succeeded")).GetNodePool()]++
		}
		if len(groups) == 3 {
			if shared.Nudged() > nudged && try < 3 {
				t.Logf("three jobs ran on groups %v while kwok lost a pod's end (nudged); running the scenario again", groups)
				continue
			}
			t.Fatalf("three jobs ran on groups %v; want at most two, one of them reused", groups)
		}
		for g := range groups {
			for s := range 2 {
				f.waitPoolGone(placement.SlicePool(g, s))
			}
		}
		if n := f.creates(); n != 2*len(groups) {
			t.Errorf("%d node pool creates for three 2-slice jobs on %d groups, want %d (two a group)", n, len(groups), 2*len(groups))
		}
		return
	}
}

// A slice pool that never comes up fails the job once the node-pool
// timeout has passed, and the slice pool that did come up is not held for
// it: the whole group is deleted.
func TestMultisliceGroupTimesOutAsAWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{provisionTimeout: 3 * time.Second, noManager: true})
	id := f.submit(sliceTask(time.Second, 2))
	group, err := gke.GroupName(id)
	if err != nil {
		t.Fatal(err)
	}
	f.fake.SetCreateOutcome(placement.SlicePool(group, 1), fakegke.OutcomeHang)
	f.start()
	f.waitJob(id, "waiting with one slice pool running", func(j *falconv1.Job) bool {
		return strings.Contains(j.GetMessage(), "1/2 slice pools RUNNING")
	})
	j := f.waitJob(id, "failed", status("Failed"))
	if j.GetReason() != "NodePoolTimeout" || !strings.Contains(j.GetMessage(), group) || !strings.Contains(j.GetMessage(), "not RUNNING") {
		t.Errorf("hung slice pool: %s %q", j.GetReason(), j.GetMessage())
	}
	f.waitPoolGone(placement.SlicePool(group, 0))
	if n := f.kubeJobs(id); n != 0 {
		t.Errorf("%d Kubernetes Jobs for a job whose group never came up", n)
	}
}

// One slice pool ending in ERROR (a stockout) fails the job with GKE's
// message, and the group is deleted whole, the member that came up too.
func TestMultisliceMemberStockoutFailsAndFreesTheGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, setup{noManager: true})
	id := f.submit(sliceTask(time.Second, 2))
	group, err := gke.GroupName(id)
	if err != nil {
		t.Fatal(err)
	}
	f.fake.SetCreateOutcome(placement.SlicePool(group, 1), fakegke.OutcomeStockout)
	f.start()
	j := f.waitJob(id, "failed", status("Failed"))
	if j.GetReason() != "NodePoolFailed" || !strings.Contains(j.GetMessage(), "ZONE_RESOURCE_POOL_EXHAUSTED") || !strings.Contains(j.GetMessage(), group) {
		t.Errorf("stockout of a slice pool: %s %q", j.GetReason(), j.GetMessage())
	}
	for s := range 2 {
		f.waitPoolGone(placement.SlicePool(group, s))
	}
	if n := f.kubeJobs(id); n != 0 {
		t.Errorf("%d Kubernetes Jobs for a job whose group failed", n)
	}
}
