package gke_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/provider/gke"
	"github.com/falconhq/falcon/internal/testenv/fakegke"
)

const (
	project = "proj"
	zone    = "us-east5-b"
	resName = "tpu-res"
)

// env is one fake GKE/Compute pair with a cluster, and a Manager using the
// real client libraries against it. Durations are scaled down: a pool takes
// 30ms to provision instead of minutes.
type env struct {
	fake    *fakegke.Server
	mgr     *gke.Manager
	cluster gke.Cluster
}

func newEnv(t *testing.T, opts ...gke.Option) *env {
	t.Helper()
	fake := fakegke.New(fakegke.WithLatency(30*time.Millisecond, 20*time.Millisecond))
	t.Cleanup(fake.Close)
	fake.AddCluster(project, zone, "edge", "https://127.0.0.1:6443", "Q0E=")
	ctx := context.Background()
	csvc, err := container.NewService(ctx, fake.ContainerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	rsvc, err := compute.NewService(ctx, fake.ComputeOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	base := []gke.Option{
		gke.WithPolling(2*time.Millisecond, 10*time.Millisecond),
		gke.WithProvisionTimeout(2 * time.Second),
	}
	return &env{
		fake:    fake,
		mgr:     gke.New(csvc, rsvc, append(base, opts...)...),
		cluster: gke.Cluster{Project: project, Location: zone, Name: "edge"},
	}
}

func slice(t *testing.T, typ, topo string, hosts int) accelerator.Slice {
	t.Helper()
	sl, err := accelerator.Resolve(typ, topo, hosts, 0)
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// waitReady looks at the pool until it is ready or has failed, as the
// resource manager does across its cycles.
func (e *env) waitReady(t *testing.T, pool string) error {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ready, err := e.mgr.Check(ctx(t), e.cluster, pool)
		if ready || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s neither ready nor failed", pool)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEnsureChoosesSupplyMode(t *testing.T) {
	v6e := slice(t, "v6e", "4x4", 4) // 4 hosts
	tests := []struct {
		name        string
		reservation *[2]int64 // count, inUse; nil: none exists
		configured  bool      // cluster has default_reservation
		supplyMode  gke.SupplyMode
		wantMode    gke.SupplyMode
		wantReason  lifecycle.Reason
		wantMsg     string
		wantInUse   int64 // reservation's inUseCount once RUNNING
	}{
		{
			name:        "reservation with room",
			reservation: &[2]int64{8, 4}, configured: true,
			wantMode: gke.SupplyReservation, wantReason: lifecycle.ReasonProvisioning,
			wantMsg: "from reservation projects/proj/zones/us-east5-b/reservations/tpu-res (4 of 8 nodes free, 4 needed)", wantInUse: 8,
		},
		{
			name:        "reservation short falls back to flex-start",
			reservation: &[2]int64{8, 5}, configured: true,
			wantMode: gke.SupplyFlexStart, wantReason: lifecycle.ReasonProvisioningFallback,
			wantMsg: "reservation projects/proj/zones/us-east5-b/reservations/tpu-res has 3 of 8 nodes free, 4 needed", wantInUse: 5,
		},
		{
			name:       "configured reservation missing falls back",
			configured: true,
			wantMode:   gke.SupplyFlexStart, wantReason: lifecycle.ReasonProvisioningFallback,
			wantMsg: "not found",
		},
		{
			name:        "no reservation configured",
			reservation: &[2]int64{8, 0},
			wantMode:    gke.SupplyFlexStart, wantReason: lifecycle.ReasonProvisioning,
			wantMsg: "no reservation configured",
		},
		{
			name:        "forced flex-start ignores a free reservation",
			reservation: &[2]int64{8, 0}, configured: true, supplyMode: gke.SupplyFlexStart,
			wantMode: gke.SupplyFlexStart, wantReason: lifecycle.ReasonProvisioning,
			wantMsg: "supply_mode flex-start",
		},
		{
			name:        "forced reservation with room",
			reservation: &[2]int64{4, 0}, configured: true, supplyMode: gke.SupplyReservation,
			wantMode: gke.SupplyReservation, wantReason: lifecycle.ReasonProvisioning,
			wantMsg: "from reservation", wantInUse: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.reservation != nil {
				e.fake.SetReservation(project, zone, resName, tt.reservation[0], tt.reservation[1])
			}
			if tt.configured {
				e.cluster.DefaultReservation = resName
			}
			res, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-abc123xyz0", SupplyMode: tt.supplyMode, Slice: v6e})
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if res.Pool != "falcon-job-abc123xyz0" || res.Mode != tt.wantMode || res.Reason != tt.wantReason || res.Adopted {
				t.Errorf("Ensure = %+v, want pool falcon-job-abc123xyz0, mode %q, reason %s", res, tt.wantMode, tt.wantReason)
			}
			if !strings.Contains(res.Message, tt.wantMsg) {
				t.Errorf("Message = %q, want it to contain %q", res.Message, tt.wantMsg)
			}
			if err := e.waitReady(t, res.Pool); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			np, _ := e.fake.Pool(res.Pool)
			if np.Status != fakegke.StatusRunning {
				t.Errorf("pool status %s, want RUNNING", np.Status)
			}
			if tt.reservation != nil {
				if _, inUse, _ := e.fake.Reservation(project, zone, resName); inUse != tt.wantInUse {
					t.Errorf("reservation inUseCount = %d, want %d", inUse, tt.wantInUse)
				}
			}
		})
	}
}

func TestEnsureForcedReservationWithoutRoomFails(t *testing.T) {
	for name, setup := range map[string]func(e *env){
		"short": func(e *env) {
			e.fake.SetReservation(project, zone, resName, 8, 6)
			e.cluster.DefaultReservation = resName
		},
		"none configured": func(e *env) {},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			setup(e)
			_, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-abc123xyz0", SupplyMode: gke.SupplyReservation, Slice: slice(t, "v6e", "4x4", 4)})
			if r, ok := gke.ReasonOf(err); !ok || r != lifecycle.ReasonNodePoolFailed {
				t.Fatalf("Ensure error = %v, want NodePoolFailed", err)
			}
			if !strings.Contains(err.Error(), "supply_mode reservation") {
				t.Errorf("message %q does not say why", err)
			}
			if n := e.fake.Creates("falcon-job-abc123xyz0"); n != 0 {
				t.Errorf("%d creates, want 0", n)
			}
		})
	}
}

func TestPoolSpec(t *testing.T) {
	tests := []struct {
		name       string
		slice      accelerator.Slice
		mode       gke.SupplyMode
		wantPolicy *container.PlacementPolicy
		wantLabel  string // scale-down label
	}{
		{"multi-host v6e from reservation", slice(t, "v6e", "4x4", 4), gke.SupplyReservation, &container.PlacementPolicy{Type: "COMPACT", TpuTopology: "4x4"}, "600s"},
		{"single-host v6e flex-start", slice(t, "v6e", "2x2", 1), gke.SupplyFlexStart, nil, "21600s"},
		{"multi-host v7x uses a workload policy", slice(t, "v7x", "2x2x2", 2), gke.SupplyFlexStart, &container.PlacementPolicy{Type: "COMPACT", PolicyName: "falcon-v7x-2x2x2"}, "21600s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.fake.SetReservation(project, zone, resName, 16, 0)
			e.cluster.DefaultReservation = resName
			res, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-spec000001", SupplyMode: tt.mode, Slice: tt.slice})
			if err != nil {
				t.Fatal(err)
			}
			np, ok := e.fake.Pool(res.Pool)
			if !ok {
				t.Fatal("pool not created")
			}
			if diff := cmp.Diff(tt.wantPolicy, np.PlacementPolicy); diff != "" {
				t.Errorf("placementPolicy (-want +got):\n%s", diff)
			}
			cfg := np.Config
			if cfg.MachineType != tt.slice.MachineType || np.InitialNodeCount != int64(tt.slice.Hosts) {
				t.Errorf("machine %s x%d, want %s x%d", cfg.MachineType, np.InitialNodeCount, tt.slice.MachineType, tt.slice.Hosts)
			}
			wantAS := &container.NodePoolAutoscaling{Enabled: true, TotalMaxNodeCount: int64(tt.slice.Hosts), LocationPolicy: "ANY"}
			if diff := cmp.Diff(wantAS, np.Autoscaling); diff != "" {
				t.Errorf("autoscaling (-want +got):\n%s", diff)
			}
			if got := cfg.Labels[gke.LabelScaleDownTime]; got != tt.wantLabel {
				t.Errorf("scale-down label %q, want %q", got, tt.wantLabel)
			}
			if cfg.Labels[gke.LabelManagedBy] != "falcon" || cfg.Labels[gke.LabelJobID] != "job-spec000001" {
				t.Errorf("labels %v", cfg.Labels)
			}
			if diff := cmp.Diff([]*container.NodeTaint{{Key: "google.com/tpu", Value: "present", Effect: "NO_SCHEDULE"}}, cfg.Taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			switch tt.mode {
			case gke.SupplyReservation:
				want := &container.ReservationAffinity{ConsumeReservationType: "SPECIFIC_RESERVATION", Key: "compute.googleapis.com/reservation-name", Values: []string{resName}}
				if diff := cmp.Diff(want, cfg.ReservationAffinity); diff != "" || cfg.FlexStart {
					t.Errorf("reservationAffinity (-want +got):\n%s flexStart=%v", diff, cfg.FlexStart)
				}
			case gke.SupplyFlexStart:
				if !cfg.FlexStart || cfg.ReservationAffinity != nil {
					t.Errorf("flexStart=%v reservationAffinity=%v, want flex-start only", cfg.FlexStart, cfg.ReservationAffinity)
				}
			}
		})
	}
}

// TestPoolSpecGPU: a GPU pool's machine type and accelerator come from the
// accelerator table (device_count picks the machine type by its GPU
// count), and fakegke, which checks them against its own table of GPU
// machine types, accepts them.
func TestPoolSpecGPU(t *testing.T) {
	gpu := func(typ string, hosts, count int) accelerator.Slice {
		t.Helper()
		sl, err := accelerator.Resolve(typ, "", hosts, count)
		if err != nil {
			t.Fatal(err)
		}
		return sl
	}
	tests := []struct {
		name        string
		slice       accelerator.Slice
		mode        gke.SupplyMode
		wantMachine string
		wantType    string
		wantCount   int64
		wantHosts   int64
		wantShape   string // falcon.dev/topology, what reuse matches
	}{
		{"h100 default count from reservation", gpu("h100", 1, 0), gke.SupplyReservation, "a3-highgpu-8g", "nvidia-h100-80gb", 8, 1, "1x8gpu"},
		{"h100 four GPUs on two hosts flex-start", gpu("nvidia-h100-80gb", 2, 4), gke.SupplyFlexStart, "a3-highgpu-4g", "nvidia-h100-80gb", 4, 2, "2x4gpu"},
		{"l4 device_count picks g2-standard-24", gpu("l4", 1, 2), gke.SupplyFlexStart, "g2-standard-24", "nvidia-l4", 2, 1, "1x2gpu"},
		{"l4 one GPU is g2-standard-4", gpu("nvidia-l4", 3, 1), gke.SupplyReservation, "g2-standard-4", "nvidia-l4", 1, 3, "3x1gpu"},
		{"a100 40GB", gpu("a100", 1, 4), gke.SupplyFlexStart, "a2-highgpu-4g", "nvidia-tesla-a100", 4, 1, "1x4gpu"},
		{"a100 80GB", gpu("a100-80gb", 1, 8), gke.SupplyFlexStart, "a2-ultragpu-8g", "nvidia-a100-80gb", 8, 1, "1x8gpu"},
		{"h100 mega", gpu("h100-mega", 1, 0), gke.SupplyFlexStart, "a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, 1, "1x8gpu"},
		{"h200", gpu("h200", 2, 0), gke.SupplyReservation, "a3-ultragpu-8g", "nvidia-h200-141gb", 8, 2, "2x8gpu"},
		{"b200", gpu("b200", 1, 0), gke.SupplyFlexStart, "a4-highgpu-8g", "nvidia-b200", 8, 1, "1x8gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.fake.SetReservation(project, zone, resName, 16, 0)
			e.cluster.DefaultReservation = resName
			res, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-gpu0000001", SupplyMode: tt.mode, Slice: tt.slice})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != tt.mode {
				t.Errorf("mode %s, want %s", res.Mode, tt.mode)
			}
			np, ok := e.fake.Pool(res.Pool)
			if !ok {
				t.Fatal("pool not created")
			}
			cfg := np.Config
			if cfg.MachineType != tt.wantMachine || np.InitialNodeCount != tt.wantHosts {
				t.Errorf("machine %s x%d, want %s x%d", cfg.MachineType, np.InitialNodeCount, tt.wantMachine, tt.wantHosts)
			}
			wantAccel := []*container.AcceleratorConfig{{
				AcceleratorType: tt.wantType, AcceleratorCount: tt.wantCount,
				GpuDriverInstallationConfig: &container.GPUDriverInstallationConfig{GpuDriverVersion: "LATEST"},
			}}
			if diff := cmp.Diff(wantAccel, cfg.Accelerators); diff != "" {
				t.Errorf("accelerators (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]*container.NodeTaint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NO_SCHEDULE"}}, cfg.Taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if np.PlacementPolicy != nil {
				t.Errorf("placementPolicy %+v on a GPU pool", np.PlacementPolicy)
			}
			if cfg.Labels[gke.LabelAccelerator] != tt.slice.Spec.Name || cfg.Labels[gke.LabelTopology] != tt.wantShape {
				t.Errorf("labels %s=%q %s=%q, want %q and %q", gke.LabelAccelerator, cfg.Labels[gke.LabelAccelerator],
					gke.LabelTopology, cfg.Labels[gke.LabelTopology], tt.slice.Spec.Name, tt.wantShape)
			}
			switch tt.mode {
			case gke.SupplyReservation:
				if cfg.ReservationAffinity == nil || cfg.FlexStart {
					t.Errorf("reservation pool: reservationAffinity=%v flexStart=%v", cfg.ReservationAffinity, cfg.FlexStart)
				}
			case gke.SupplyFlexStart:
				if !cfg.FlexStart || cfg.ReservationAffinity != nil {
					t.Errorf("flex-start pool: flexStart=%v reservationAffinity=%v", cfg.FlexStart, cfg.ReservationAffinity)
				}
			}
			if err := e.waitReady(t, res.Pool); err != nil {
				t.Fatal(err)
			}
			pools, err := e.mgr.ListFalconPools(ctx(t), e.cluster)
			if err != nil || len(pools) != 1 || pools[0].Labels[gke.LabelTopology] != tt.wantShape || pools[0].MachineType != tt.wantMachine {
				t.Errorf("listed %+v, %v; want one pool of shape %s", pools, err, tt.wantShape)
			}
		})
	}
}

// TestGPUPoolRefusedByGKE: an accelerator table row whose machine type
// does not carry its GPU is refused by GKE with INVALID_ARGUMENT, and the
// job fails with NodePoolFailed and GKE's message instead of waiting for
// nodes no pod would select.
func TestGPUPoolRefusedByGKE(t *testing.T) {
	e := newEnv(t)
	sl := slice(t, "h100", "", 1)
	sl.MachineType = "g2-standard-96" // a wrong row: L4 machines for an H100 slice
	_, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-gpubad0001", Slice: sl})
	var pe *gke.PoolError
	if !errors.As(err, &pe) || pe.Reason != lifecycle.ReasonNodePoolFailed ||
		!strings.Contains(pe.Message, `Accelerator type "nvidia-h100-80gb" is not supported with machine type "g2-standard-96"`) {
		t.Fatalf("Ensure = %v, want NodePoolFailed with GKE's refusal", err)
	}
	if names := e.fake.PoolNames(); len(names) != 0 {
		t.Errorf("pools %v after a refused create", names)
	}
}

func TestEnsureAdoptsPoolAfterRestart(t *testing.T) {
	e := newEnv(t)
	req := gke.Request{Cluster: e.cluster, JobID: "job-abc123xyz0", Slice: slice(t, "v6e", "4x4", 4)}
	first, err := e.mgr.Ensure(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	// The controller "crashes" here; a new one runs the same step again.
	second, err := e.mgr.Ensure(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Adopted || second.Pool != first.Pool || second.Mode != gke.SupplyFlexStart {
		t.Errorf("second Ensure = %+v, want adoption of %s in flex-start", second, first.Pool)
	}
	if !second.CreatedAt.Equal(first.CreatedAt.Truncate(time.Second)) {
		t.Errorf("adopted CreatedAt %v, want %v (the deadline must not restart)", second.CreatedAt, first.CreatedAt)
	}
	if err := e.waitReady(t, second.Pool); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.Creates(first.Pool); n != 1 {
		t.Errorf("%d creates, want exactly 1", n)
	}
}

func TestEnsureRetriesTransientErrors(t *testing.T) {
	e := newEnv(t)
	e.fake.FailNext(2, 503)
	res, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-abc123xyz0", Slice: slice(t, "v6e", "2x2", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.waitReady(t, res.Pool); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.Creates(res.Pool); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

func TestCheckFailures(t *testing.T) {
	// The deadline counts from the pool's created-at label, which has
	// whole seconds: timeouts here leave room for that.
	tests := []struct {
		name       string
		outcome    fakegke.Outcome
		timeout    time.Duration
		wantReason lifecycle.Reason
		wantMsg    string
	}{
		{"quota exceeded", fakegke.OutcomeQuotaExceeded, 5 * time.Second, lifecycle.ReasonNodePoolFailed, "node pool falcon-job-abc123xyz0: " + fakegke.QuotaMessage},
		{"stockout", fakegke.OutcomeStockout, 5 * time.Second, lifecycle.ReasonNodePoolFailed, "node pool falcon-job-abc123xyz0: " + fakegke.StockoutMessage},
		{"operation never finishes", fakegke.OutcomeHang, 1500 * time.Millisecond, lifecycle.ReasonNodePoolTimeout, "node pool falcon-job-abc123xyz0 not RUNNING 1.5s after creation (status PROVISIONING)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, gke.WithProvisionTimeout(tt.timeout))
			e.fake.SetCreateOutcome("falcon-job-abc123xyz0", tt.outcome)
			res, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-abc123xyz0", Slice: slice(t, "v6e", "4x4", 4)})
			if err != nil {
				t.Fatal(err)
			}
			err = e.waitReady(t, res.Pool)
			var pe *gke.PoolError
			if !errors.As(err, &pe) {
				t.Fatalf("Check = %v, want *PoolError", err)
			}
			if diff := cmp.Diff(tt.wantMsg, pe.Message); pe.Reason != tt.wantReason || diff != "" {
				t.Errorf("Check reason %s, want %s; message (-want +got):\n%s", pe.Reason, tt.wantReason, diff)
			}
		})
	}
}

func TestCheckAfterAdoptingFailedPool(t *testing.T) {
	e := newEnv(t)
	e.fake.SetCreateOutcome("", fakegke.OutcomeQuotaExceeded)
	req := gke.Request{Cluster: e.cluster, JobID: "job-abc123xyz0", Slice: slice(t, "v6e", "4x4", 4)}
	if _, err := e.mgr.Ensure(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond) // the create fails while no controller runs
	res, err := e.mgr.Ensure(ctx(t), req)
	if err != nil || !res.Adopted {
		t.Fatalf("Ensure = %+v, %v; want adoption", res, err)
	}
	err = e.waitReady(t, res.Pool)
	if r, _ := gke.ReasonOf(err); r != lifecycle.ReasonNodePoolFailed || !strings.Contains(err.Error(), "TPUS_PER_PROJECT") {
		t.Errorf("Check = %v, want NodePoolFailed with GKE's quota message", err)
	}
}

func TestStartDelete(t *testing.T) {
	const pool = "falcon-job-abc123xyz0"
	tests := []struct {
		name    string
		create  bool
		ready   bool // wait for the create to finish first
		inject  func(f *fakegke.Server)
		wantErr string // substring; empty: success
		busy    bool   // the error is ErrBusy
		gone    bool   // the pool goes
	}{
		{name: "running pool", create: true, ready: true, gone: true},
		{name: "missing pool is success", gone: true},
		{name: "5xx is returned for a later retry", create: true, ready: true,
			inject: func(f *fakegke.Server) { f.FailDeletes(pool, 1, 503) }, wantErr: "Injected delete failure"},
		{name: "refusal is returned", create: true, ready: true,
			inject: func(f *fakegke.Server) { f.FailDeletes(pool, 1, 403) }, wantErr: "delete node pool falcon-job-abc123xyz0: Injected delete failure"},
		{name: "a create in progress makes it busy", create: true, wantErr: "currently creating", busy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.create {
				res, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-abc123xyz0", Slice: slice(t, "v6e", "2x2", 1)})
				if err != nil {
					t.Fatal(err)
				}
				if tt.ready {
					if err := e.waitReady(t, res.Pool); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tt.inject != nil {
				tt.inject(e.fake)
			}
			err := e.mgr.StartDelete(ctx(t), e.cluster, pool)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("StartDelete: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("StartDelete = %v, want error containing %q", err, tt.wantErr)
			case errors.Is(err, gke.ErrBusy) != tt.busy:
				t.Fatalf("StartDelete = %v: busy %v, want %v", err, errors.Is(err, gke.ErrBusy), tt.busy)
			}
			deadline := time.Now().Add(2 * time.Second)
			for {
				_, exists := e.fake.Pool(pool)
				if !exists == tt.gone {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("pool exists = %v, want gone = %v", exists, tt.gone)
				}
				e.fake.Sync()
				time.Sleep(5 * time.Millisecond)
			}
			if tt.gone { // idempotent: again is still success
				if err := e.mgr.StartDelete(ctx(t), e.cluster, pool); err != nil {
					t.Errorf("second StartDelete: %v", err)
				}
			}
		})
	}
}

func TestListFalconPools(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"job-bbb", "job-aaa"} {
		if _, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: id, Slice: slice(t, "v6e", "4x4", 4)}); err != nil {
			t.Fatal(err)
		}
	}
	// A pool someone else made, even with our prefix, is not Falcon's.
	csvc, _ := container.NewService(ctx(t), e.fake.ContainerOptions()...)
	if _, err := csvc.Projects.Locations.Clusters.NodePools.Create("projects/proj/locations/us-east5-b/clusters/edge",
		&container.CreateNodePoolRequest{NodePool: &container.NodePool{Name: "falcon-manual", InitialNodeCount: 1, Config: &container.NodeConfig{MachineType: "e2-standard-4"}}}).Do(); err != nil {
		t.Fatal(err)
	}
	pools, err := e.mgr.ListFalconPools(ctx(t), e.cluster)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pools {
		if p.CreatedAt.IsZero() || p.Mode != gke.SupplyFlexStart || p.Topology != "4x4" || p.Nodes != 4 || p.MachineType != "ct6e-standard-4t" {
			t.Errorf("pool %+v: missing fields", p)
		}
		got = append(got, p.Name+"="+p.JobID)
	}
	if diff := cmp.Diff([]string{"falcon-job-aaa=job-aaa", "falcon-job-bbb=job-bbb"}, got); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
}

func TestPoolName(t *testing.T) {
	tests := []struct {
		id, want, wantErr string
	}{
		{id: "job-abc123xyz0", want: "falcon-job-abc123xyz0"},
		{id: "JOB-ABC", want: "falcon-job-abc"},
		{id: "job-0123456789abcdef0123456789abcdef", want: "falcon-job-0123456789abcdef0123-93b3e331"},
		{id: "job_1", wantErr: "does not make a valid GKE node pool name"},
	}
	for _, tt := range tests {
		got, err := gke.PoolName(tt.id)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("PoolName(%q) error = %v, want %q", tt.id, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || len(got) > 40 {
			t.Errorf("PoolName(%q) = %q, %v; want %q", tt.id, got, err, tt.want)
		}
	}
}

// TestEnsureCreatesTheV7xWorkloadPolicyOnce: a multi-host v7x pool names a
// Compute workload policy carrying its topology; GKE refuses the pool when
// the policy is missing, so Ensure creates it first, once per shape.
func TestEnsureCreatesTheV7xWorkloadPolicyOnce(t *testing.T) {
	e := newEnv(t)
	sl := slice(t, "v7x", "2x2x2", 2)
	for _, job := range []string{"job-v7xaaaaaaa", "job-v7xbbbbbbb"} {
		r, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: job, Slice: sl})
		if err != nil {
			t.Fatalf("ensure %s: %v", job, err)
		}
		if err := e.waitReady(t, r.Pool); err != nil {
			t.Fatalf("wait %s: %v", job, err)
		}
	}
	p, ok := e.fake.ResourcePolicy(project, "us-east5", "falcon-v7x-2x2x2")
	if !ok || p.WorkloadPolicy == nil || p.WorkloadPolicy.AcceleratorTopology != "2x2x2" || p.WorkloadPolicy.Type != "HIGH_THROUGHPUT" {
		t.Fatalf("workload policy: %+v (found %v)", p.WorkloadPolicy, ok)
	}
	inserts := 0
	for _, c := range e.fake.Calls() {
		if c.Method == "POST" && strings.HasSuffix(c.Path, "/resourcePolicies") {
			inserts++
		}
	}
	if inserts != 1 {
		t.Errorf("%d workload policy inserts for two pools of one shape, want 1", inserts)
	}
	// Single-host v7x needs no policy.
	if _, err := e.mgr.Ensure(ctx(t), gke.Request{Cluster: e.cluster, JobID: "job-v7xccccccc", Slice: slice(t, "v7x", "2x2x1", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.fake.ResourcePolicy(project, "us-east5", "falcon-v7x-2x2x1"); ok {
		t.Error("a workload policy was created for a single-host slice")
	}
}

func TestNeedsPool(t *testing.T) {
	b := gke.NewBackend(nil, nil)
	defer b.Close()
	tests := []struct {
		deviceType string
		want       bool
	}{
		{"v5p", true},
		{"tpu7x", true},
		{"nvidia-h100-80gb", true},
		{"cpu", false},
		{"", false},       // no accelerator named: CPU
		{"mystery", true}, // unknown: provisioning fails it with a clear message
	}
	for _, tt := range tests {
		j := &falconv1.Job{TaskSpec: &falconv1.TaskSpec{DeviceType: tt.deviceType}}
		if got := b.NeedsPool(j); got != tt.want {
			t.Errorf("NeedsPool(%q) = %v, want %v", tt.deviceType, got, tt.want)
		}
	}
}
