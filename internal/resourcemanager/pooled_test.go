package resourcemanager_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// pooledScripted is scripted on a cluster whose backend manages node
// pools, as GKE's does: every job with an accelerator gets a pool, ready
// as soon as it is created unless the test says otherwise.
type pooledScripted struct {
	*scripted
	pmu     sync.Mutex
	pools   map[string]resourcemanager.Pool
	creates int
	deleted []string
	// slow: pools created from now on stay Provisioning.
	slow bool
	// broken: what CheckPool says of a pool that will never be ready.
	broken map[string]*resourcemanager.PoolError
}

var _ resourcemanager.PoolBackend = (*pooledScripted)(nil)

func newPooledScripted() *pooledScripted {
	return &pooledScripted{scripted: newScripted(), pools: map[string]resourcemanager.Pool{}, broken: map[string]*resourcemanager.PoolError{}}
}

func (p *pooledScripted) NeedsPool(j *falconv1.Job) bool {
	return j.GetTaskSpec().GetDeviceType() != ""
}

func (p *pooledScripted) ProvisionPool(_ context.Context, _ *falconv1.Cluster, j *falconv1.Job) (resourcemanager.Provisioning, error) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	name := "pool-" + j.GetId()
	if _, ok := p.pools[name]; !ok {
		p.creates++
		state, status := lifecycle.PoolReady, "RUNNING"
		if p.slow {
			state, status = lifecycle.PoolProvisioning, "PROVISIONING"
		}
		p.pools[name] = resourcemanager.Pool{
			Name: name, AcceleratorType: placement.DeviceType(j.GetTaskSpec().GetDeviceType()), Topology: placement.PoolShape(j.GetTaskSpec()),
			Nodes: 1, State: state, Status: status, SupplyMode: "on-demand", CreatedFor: j.GetId(), CreatedAt: time.Now(),
		}
	}
	return resourcemanager.Provisioning{Pool: name, Reason: lifecycle.ReasonProvisioning, Message: "creating node pool " + name}, nil
}

func (p *pooledScripted) CheckPool(_ context.Context, _ *falconv1.Cluster, pool string) (resourcemanager.PoolCheck, error) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if pe := p.broken[pool]; pe != nil {
		return resourcemanager.PoolCheck{}, pe
	}
	return resourcemanager.PoolCheck{Ready: p.pools[pool].State == lifecycle.PoolReady}, nil
}

func (p *pooledScripted) ListPools(context.Context, *falconv1.Cluster) ([]resourcemanager.Pool, error) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	out := make([]resourcemanager.Pool, 0, len(p.pools))
	for _, x := range p.pools {
		out = append(out, x)
	}
	return out, nil
}

func (p *pooledScripted) DeletePool(_ context.Context, _ *falconv1.Cluster, pool string) error {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	if _, ok := p.pools[pool]; ok {
		delete(p.pools, pool)
		p.deleted = append(p.deleted, pool)
	}
	return nil
}

func (p *pooledScripted) Reservation(context.Context, *falconv1.Cluster) (*falconv1.ReservationCapacity, error) {
	return nil, nil
}

// counts reports the pools created and deleted so far.
func (p *pooledScripted) counts() (creates int, deleted []string) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	return p.creates, slices.Clone(p.deleted)
}

// startPooled is a manager under Run over a pooled backend, its pools
// listed afresh every cycle so that the test's pools are seen at once, and
// a pool no job owns kept while it is younger than grace.
func startPooled(t *testing.T, grace time.Duration) (*deckRun, *pooledScripted) {
	t.Helper()
	be := newPooledScripted()
	return startDeckOn(t, apitest.Start(t, map[string]string{"local": "test"}), be.scripted, be,
		resourcemanager.WithPoolTiming(resourcemanager.PoolTiming{PollInitial: time.Millisecond, PollMax: time.Millisecond, DeleteAttempts: 1, Grace: grace})), be
}

// On a cluster whose backend manages pools, a Running job's success is
// recorded the moment its backend reports it too, though the cycle in
// flight is stuck on its write; its Kubernetes Job is removed and, once
// the cycle folds the row, its pool, which no job waits for, is deleted.
func TestAPooledEndIsRecordedBeforeAnyCycle(t *testing.T) {
	d, be := startPooled(t, 0)
	ended := d.env.Create(t, "ended", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	other := d.env.Create(t, "other", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}).GetJobs()[0].GetId()
	if j := d.waitJob(t, ended, "Running", "", ""); j.GetNodePool() != "pool-"+ended {
		t.Fatalf("the job runs on pool %q, want its own", j.GetNodePool())
	}
	d.waitJob(t, other, "Running", "", "")
	waitQuiet(t, d.reg)
	d.gate.holdBatches()
	be.set(other, resourcemanager.PhaseRunning, "1/1 running, 1 restart")
	d.touch(other)
	waitFor(t, "a cycle stuck on its write", func() bool { return d.gate.blocked.Load() > 0 })

	be.set(ended, resourcemanager.PhaseSucceeded, "exit 0")
	d.touch(ended)
	d.waitJob(t, ended, "Succeeded", "", "exit 0")
	if d.gate.blocked.Load() == 0 {
		t.Fatal("the cycle's write passed before the end was recorded; the test shows nothing")
	}
	waitFor(t, "the ended job's Kubernetes Job removed", func() bool {
		be.mu.Lock()
		defer be.mu.Unlock()
		return be.stopped[ended] > 0
	})
	d.gate.pass()
	waitFor(t, "the ended job's pool deleted", func() bool {
		_, deleted := be.counts()
		return slices.Contains(deleted, "pool-"+ended)
	})
	if got := metric(t, d.reg, "falcon_rm_ends_ahead_total"); got != 1 {
		t.Errorf("falcon_rm_ends_ahead_total = %v, want 1", got)
	}
}

// A job that would create a pool while another job of its shape ends,
// its end being written between cycles, waits for that pool rather than
// have one created: once the end is folded it takes the pool over.
func TestAJobTakesThePoolOfAnEndBeingWritten(t *testing.T) {
	d, be := startPooled(t, 0)
	first := d.env.Create(t, "first", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	d.waitJob(t, first, "Running", "", "")
	waitQuiet(t, d.reg)
	d.gate.holdSingles()
	be.set(first, resourcemanager.PhaseSucceeded, "exit 0")
	d.touch(first)
	waitFor(t, "the end's write held", func() bool { return d.gate.blocked.Load() > 0 })

	second := d.env.Create(t, "second", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	d.waitJob(t, second, "Pending", "Dispatching", "submitting to cluster local")
	// The cycles that picked it and looked at it again leave it waiting.
	d.touch(second)
	waitQuiet(t, d.reg)
	d.touch(second)
	waitQuiet(t, d.reg)
	if creates, _ := be.counts(); creates != 1 {
		t.Fatalf("%d node pools created while the first job's end was being written, want 1: the second waits for the first's pool", creates)
	}
	if j := d.env.Job(t, second); j.GetNodePool() != "" {
		t.Fatalf("the second job was given pool %q while the first still held it", j.GetNodePool())
	}

	d.gate.pass()
	j := d.waitJob(t, second, "Running", "", "")
	if j.GetNodePool() != "pool-"+first {
		t.Errorf("the second job runs on pool %q, want the first's, pool-%s", j.GetNodePool(), first)
	}
	if creates, _ := be.counts(); creates != 1 {
		t.Errorf("%d node pools created for two jobs of one shape run one after the other, want 1", creates)
	}
}

// A job that took over a pool still being created for a job that was
// aborted is not failed when that pool fails: it gets a pool of its own,
// its message saying what became of the one it took, and the failed pool
// is deleted.
func TestATakenOverPoolFailingIsReplaced(t *testing.T) {
	d, be := startPooled(t, time.Hour)
	be.pmu.Lock()
	be.slow = true
	be.pmu.Unlock()
	first := d.env.Create(t, "first", map[string]*falconv1.TaskSpec{"main": slotTask})
	d.waitJob(t, first.GetJobs()[0].GetId(), "Pending", "Provisioning", "")
	if _, err := d.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: first.GetId(), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	d.waitJob(t, first.GetJobs()[0].GetId(), "Aborted", "", "")
	taken := "pool-" + first.GetJobs()[0].GetId()
	second := d.env.Create(t, "second", map[string]*falconv1.TaskSpec{"main": slotTask}).GetJobs()[0].GetId()
	d.waitJob(t, second, "Pending", "Provisioning", "taking over node pool "+taken)
	// The pool it took over fails: GKE lists it in error, and says why.
	be.pmu.Lock()
	p := be.pools[taken]
	p.State, p.Status = lifecycle.PoolFailed, "ERROR"
	be.pools[taken] = p
	be.broken[taken] = &resourcemanager.PoolError{Reason: "NodePoolFailed", Message: "GKE: the zone has no capacity"}
	be.pmu.Unlock()
	own := "pool-" + second
	j := d.waitJob(t, second, "Pending", "Provisioning", "node pool "+taken+", taken over from a job that ended, failed (GKE: the zone has no capacity); creating node pool "+own)
	if j.GetNodePool() != own {
		t.Errorf("the second job waits for pool %q, want its own, %s", j.GetNodePool(), own)
	}
	be.pmu.Lock()
	p = be.pools[own]
	p.State, p.Status = lifecycle.PoolReady, "RUNNING"
	be.pools[own] = p
	be.pmu.Unlock()
	if j := d.waitJob(t, second, "Running", "", ""); j.GetNodePool() != own {
		t.Errorf("the second job runs on pool %q, want its own, %s", j.GetNodePool(), own)
	}
	waitFor(t, "the failed pool deleted", func() bool {
		_, deleted := be.counts()
		return slices.Contains(deleted, taken)
	})
}
