package fakegke_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	"google.golang.org/api/googleapi"

	"github.com/falconhq/falcon/internal/testenv/fakegke"
)

const clusterPath = "projects/p/locations/us-east5-b/clusters/c"

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newServer(t *testing.T) (*fakegke.Server, *fakeClock, *container.Service, *compute.Service) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := fakegke.New(fakegke.WithClock(clk.Now), fakegke.WithLatency(5*time.Minute, 2*time.Minute))
	t.Cleanup(s.Close)
	s.AddCluster("p", "us-east5-b", "c", "https://10.0.0.1", "Q0EtUEVN")
	csvc, err := container.NewService(context.Background(), s.ContainerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	rsvc, err := compute.NewService(context.Background(), s.ComputeOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, csvc, rsvc
}

func code(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func TestClusterGet(t *testing.T) {
	_, _, csvc, _ := newServer(t)
	c, err := csvc.Projects.Locations.Clusters.Get(clusterPath).Do()
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint != "https://10.0.0.1" || c.MasterAuth.ClusterCaCertificate != "Q0EtUEVN" || c.Status != "RUNNING" {
		t.Errorf("cluster = %+v", c)
	}
	if _, err := csvc.Projects.Locations.Clusters.Get("projects/p/locations/us-east5-b/clusters/other").Do(); code(err) != 404 {
		t.Errorf("missing cluster: %v, want 404", err)
	}
}

func TestPoolLifecycle(t *testing.T) {
	s, clk, csvc, _ := newServer(t)
	var running, deleted []string
	s.OnPoolRunning(func(np container.NodePool) { running = append(running, np.Name) })
	s.OnPoolDeleted(func(np container.NodePool) { deleted = append(deleted, np.Name) })

	op, err := csvc.Projects.Locations.Clusters.NodePools.Create(clusterPath, &container.CreateNodePoolRequest{
		NodePool: &container.NodePool{Name: "falcon-a", InitialNodeCount: 2, Config: &container.NodeConfig{MachineType: "ct6e-standard-4t"}},
	}).Do()
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != "RUNNING" || op.OperationType != "CREATE_NODE_POOL" {
		t.Errorf("create op = %+v", op)
	}
	if _, err := csvc.Projects.Locations.Clusters.NodePools.Create(clusterPath, &container.CreateNodePoolRequest{
		NodePool: &container.NodePool{Name: "falcon-a"},
	}).Do(); code(err) != http.StatusConflict {
		t.Errorf("duplicate create: %v, want 409", err)
	}
	np, _ := csvc.Projects.Locations.Clusters.NodePools.Get(clusterPath + "/nodePools/falcon-a").Do()
	if np.Status != "PROVISIONING" {
		t.Errorf("status %s, want PROVISIONING", np.Status)
	}
	if _, err := csvc.Projects.Locations.Clusters.NodePools.Delete(clusterPath + "/nodePools/falcon-a").Do(); code(err) != 400 {
		t.Errorf("delete during create: %v, want 400 FAILED_PRECONDITION", err)
	}

	clk.Step(5 * time.Minute)
	opPath := "projects/p/locations/us-east5-b/operations/" + op.Name
	done, err := csvc.Projects.Locations.Operations.Get(opPath).Do()
	if err != nil || done.Status != "DONE" || done.Error != nil {
		t.Fatalf("op after latency = %+v, %v; want DONE", done, err)
	}
	np, _ = csvc.Projects.Locations.Clusters.NodePools.Get(clusterPath + "/nodePools/falcon-a").Do()
	if np.Status != "RUNNING" {
		t.Errorf("status %s, want RUNNING", np.Status)
	}

	dop, err := csvc.Projects.Locations.Clusters.NodePools.Delete(clusterPath + "/nodePools/falcon-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	list, _ := csvc.Projects.Locations.Clusters.NodePools.List(clusterPath).Do()
	if len(list.NodePools) != 1 || list.NodePools[0].Status != "STOPPING" {
		t.Errorf("during delete: %+v", list.NodePools)
	}
	clk.Step(2 * time.Minute)
	if dop, _ = csvc.Projects.Locations.Operations.Get("projects/p/locations/us-east5-b/operations/" + dop.Name).Do(); dop.Status != "DONE" {
		t.Errorf("delete op %s, want DONE", dop.Status)
	}
	if _, err := csvc.Projects.Locations.Clusters.NodePools.Get(clusterPath + "/nodePools/falcon-a").Do(); code(err) != 404 {
		t.Errorf("get after delete: %v, want 404", err)
	}
	if diff := cmp.Diff([]string{"falcon-a"}, running); diff != "" {
		t.Errorf("OnPoolRunning (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"falcon-a"}, deleted); diff != "" {
		t.Errorf("OnPoolDeleted (-want +got):\n%s", diff)
	}
	if s.Creates("falcon-a") != 1 || s.Deletes("falcon-a") != 1 {
		t.Errorf("creates %d deletes %d, want 1 and 1", s.Creates("falcon-a"), s.Deletes("falcon-a"))
	}
}

func TestQuotaFailure(t *testing.T) {
	s, clk, csvc, _ := newServer(t)
	s.SetCreateOutcome("", fakegke.OutcomeQuotaExceeded)
	op, err := csvc.Projects.Locations.Clusters.NodePools.Create(clusterPath, &container.CreateNodePoolRequest{
		NodePool: &container.NodePool{Name: "falcon-q", InitialNodeCount: 1, Config: &container.NodeConfig{}},
	}).Do()
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(5 * time.Minute)
	op, _ = csvc.Projects.Locations.Operations.Get("projects/p/locations/us-east5-b/operations/" + op.Name).Do()
	if op.Status != "DONE" || op.Error == nil || op.Error.Code != 8 || op.Error.Message != fakegke.QuotaMessage {
		t.Errorf("op = %+v error %+v; want DONE with code 8 and the quota message", op, op.Error)
	}
	np, _ := s.Pool("falcon-q")
	if np.Status != "ERROR" {
		t.Errorf("pool status %s, want ERROR", np.Status)
	}
}

func TestReservation(t *testing.T) {
	s, clk, csvc, rsvc := newServer(t)
	s.SetReservation("p", "us-east5-b", "r", 8, 2)
	r, err := rsvc.Reservations.Get("p", "us-east5-b", "r").Do()
	if err != nil {
		t.Fatal(err)
	}
	if r.SpecificReservation.Count != 8 || r.SpecificReservation.InUseCount != 2 {
		t.Errorf("reservation = %+v", r.SpecificReservation)
	}
	if _, err := rsvc.Reservations.Get("p", "us-east5-b", "missing").Do(); code(err) != 404 {
		t.Errorf("missing reservation: %v, want 404", err)
	}
	// A pool consuming it holds its nodes until deleted.
	aff := &container.ReservationAffinity{ConsumeReservationType: "SPECIFIC_RESERVATION", Key: "compute.googleapis.com/reservation-name", Values: []string{"r"}}
	if _, err := csvc.Projects.Locations.Clusters.NodePools.Create(clusterPath, &container.CreateNodePoolRequest{
		NodePool: &container.NodePool{Name: "falcon-r", InitialNodeCount: 4, Config: &container.NodeConfig{ReservationAffinity: aff}},
	}).Do(); err != nil {
		t.Fatal(err)
	}
	if _, inUse, _ := s.Reservation("p", "us-east5-b", "r"); inUse != 6 {
		t.Errorf("inUse %d, want 6", inUse)
	}
	clk.Step(5 * time.Minute)
	if _, err := csvc.Projects.Locations.Clusters.NodePools.Delete(clusterPath + "/nodePools/falcon-r").Do(); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Minute)
	s.Sync()
	if _, inUse, _ := s.Reservation("p", "us-east5-b", "r"); inUse != 2 {
		t.Errorf("inUse after delete %d, want 2", inUse)
	}
}

func TestInjectedTransientFailures(t *testing.T) {
	s, _, csvc, _ := newServer(t)
	s.FailNext(1, 503)
	// The client library does not retry; the first call sees the 503.
	if _, err := csvc.Projects.Locations.Clusters.Get(clusterPath).Do(); code(err) != 503 {
		t.Errorf("first call: %v, want 503", err)
	}
	if _, err := csvc.Projects.Locations.Clusters.Get(clusterPath).Do(); err != nil {
		t.Errorf("second call: %v", err)
	}
}
