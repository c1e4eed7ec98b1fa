package resourcemanager_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// TestRegistrySelectionPolicy: the registry's selection places the jobs
// (spread would take edge-a, first by name; priority skips it because its
// last probe failed), and a job left waiting already carries the record
// that put it in its queue, written with its first position.
func TestRegistrySelectionPolicy(t *testing.T) {
	for _, tt := range []struct {
		selection, wantCluster, wantReason string
	}{
		{"", "edge-a", "shortest queue for v7x:2x2x1, queue_depth=1"},
		{"priority", "edge-b", "reachable, queue_depth=2 <= max=unbounded"},
	} {
		t.Run("selection="+tt.selection, func(t *testing.T) {
			ctx := context.Background()
			env := apitest.Start(t, map[string]string{"edge-a": "test", "edge-b": "test"})
			if err := env.Store.PutRegistrySetting(ctx, store.SettingSelection, tt.selection); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			at := timestamppb.New(now.Add(-10 * time.Second))
			if _, err := falconv1.NewClusterServiceClient(env.Conn).ReportClusterProbes(ctx, &falconv1.ReportClusterProbesRequest{Items: []*falconv1.ClusterProbe{
				{Cluster: "edge-a", Reachable: false, Error: "probe timed out after 3s", ProbedAt: at},
				{Cluster: "edge-b", Reachable: true, ProbedAt: at},
			}}); err != nil {
				t.Fatal(err)
			}
			be := newScripted()
			be.startPhase = resourcemanager.PhasePending // the first job holds the queue's slot
			mgr := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be), resourcemanager.WithClock(func() time.Time { return now }))
			task := func() map[string]*falconv1.TaskSpec {
				return map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}}
			}
			first := env.Create(t, "first", task()).GetJobs()[0].GetId()
			if _, err := mgr.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			// Spread sends the second to edge-b's empty queue and the third
			// waits behind the first; priority queues both on edge-b.
			env.Create(t, "second", task())
			third := env.Create(t, "third", task()).GetJobs()[0].GetId()
			if _, err := mgr.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			want := "spread"
			if tt.selection != "" {
				want = tt.selection
			}
			if j := env.Job(t, first); j.GetClusterName() != tt.wantCluster || j.GetSelection().GetPolicy() != want {
				t.Errorf("first job on %q by %q; want %s by %s", j.GetClusterName(), j.GetSelection().GetPolicy(), tt.wantCluster, want)
			}
			w := env.Job(t, third)
			want2 := "selected " + tt.wantCluster + ": " + tt.wantReason
			if w.GetReason() != "Waiting" || !strings.HasPrefix(w.GetSelection().GetReason(), want2) || w.GetSelection().GetSelectedCluster() != tt.wantCluster {
				t.Errorf("waiting job %s/%s %q has record %q (cluster %q); want one starting %q", w.GetStatus(), w.GetReason(), w.GetMessage(),
					w.GetSelection().GetReason(), w.GetSelection().GetSelectedCluster(), want2)
			}
		})
	}
}

// TestUnplaceableJob: a job whose accelerator no cluster offers fails in
// the cycle that first places it, with design 001's text; one whose only
// cluster is in maintenance waits and says so.
func TestUnplaceableJob(t *testing.T) {
	for _, tt := range []struct {
		name, status        string
		wantStatus, wantMsg string
	}{
		{"no cluster offers it", store.ClusterActive, "Failed", "no cluster supports v7x: local: does not offer v7x; never probed"},
		{"its cluster is in maintenance", store.ClusterMaintenance, "Pending", "no active cluster offers v5p (local: not active); the job waits until one can take it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			ctx := context.Background()
			c, err := f.env.Store.GetCluster(ctx, "local")
			if err != nil {
				t.Fatal(err)
			}
			c.AcceleratorTypes, c.Status = []string{"v5p"}, tt.status
			if _, err := f.env.Store.UpsertCluster(ctx, c); err != nil {
				t.Fatal(err)
			}
			typ := "v5p"
			if tt.wantStatus == "Failed" {
				typ = "v7x"
			}
			_, job := f.one(t, &falconv1.TaskSpec{Command: "x", Replica: 1, DeviceType: typ, DeviceTopo: "2x2x1"})
			f.cycle(t)
			j := f.env.Job(t, job)
			if j.GetStatus() != tt.wantStatus || !strings.Contains(j.GetMessage(), tt.wantMsg) {
				t.Errorf("job %s/%s %q; want %s with %q", j.GetStatus(), j.GetReason(), j.GetMessage(), tt.wantStatus, tt.wantMsg)
			}
			if len(f.be.dispatched) != 0 {
				t.Error("dispatched")
			}
		})
	}
}
