package resourcemanager_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// TestPickStoresSelectionRecord: the decision record of a job's placement
// reaches the job's row in the write that records the pick, and the API
// serves it with the job (GetJob and ListJobs), every candidate's last
// probe included.
func TestPickStoresSelectionRecord(t *testing.T) {
	ctx := context.Background()
	env := apitest.Start(t, map[string]string{"edge-a": "test", "edge-b": "test"})
	now := time.Now()
	probedAt := now.Add(-20 * time.Second).UTC().Truncate(time.Second)
	cl := falconv1.NewClusterServiceClient(env.Conn)
	if _, err := cl.ReportClusterProbes(ctx, &falconv1.ReportClusterProbesRequest{Items: []*falconv1.ClusterProbe{
		{Cluster: "edge-a", Reachable: false, Error: "probe timed out after 3s", ProbedAt: timestamppb.New(probedAt)},
	}}); err != nil {
		t.Fatal(err)
	}
	be := newScripted()
	mgr := resourcemanager.New(env.Conn, resourcemanager.WithBackend("test", be), resourcemanager.WithClock(func() time.Time { return now }))
	first := env.Create(t, "first", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}).GetJobs()[0].GetId()
	if _, err := mgr.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	j := env.Job(t, first)
	sel := j.GetSelection()
	if sel == nil {
		t.Fatalf("job %s (%s/%s on %s) has no selection record", first, j.GetStatus(), j.GetReason(), j.GetClusterName())
	}
	if sel.GetSelectedCluster() != j.GetClusterName() || !strings.HasPrefix(sel.GetReason(), "selected "+j.GetClusterName()+": ") {
		t.Errorf("record chose %s (%q); the job runs on %s", sel.GetSelectedCluster(), sel.GetReason(), j.GetClusterName())
	}
	if sel.GetPolicy() != "spread" || sel.GetDecidedAt().AsTime().Unix() != now.Unix() {
		t.Errorf("policy %q decided at %v; want spread at %v", sel.GetPolicy(), sel.GetDecidedAt().AsTime(), now)
	}
	if n := len(sel.GetCandidates()); n != 2 {
		t.Fatalf("record holds %d candidates; want both clusters", n)
	}
	var probe *falconv1.ClusterProbe
	for _, c := range sel.GetCandidates() {
		if c.GetCluster() == "edge-a" {
			probe = c.GetProbe()
		}
	}
	if probe.GetError() != "probe timed out after 3s" || !probe.GetProbedAt().AsTime().Equal(probedAt) {
		t.Errorf("edge-a's probe in the record = %v; want the reported one", probe)
	}
	list, err := env.Jobs.ListJobs(ctx, &falconv1.ListJobsRequest{ExpId: j.GetExpId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := list.GetItems()[0].GetSelection().GetReason(); got != sel.GetReason() {
		t.Errorf("ListJobs serves reason %q; GetJob %q", got, sel.GetReason())
	}
}
