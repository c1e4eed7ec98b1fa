package apiserver_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/probe"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// TestProbeClustersLeavesLocalOnesAlone: a local cluster's jobs are the
// controller's own processes, so a probe of it could only fail; kept, it
// read as "unreachable" in `cluster status`. Probing every cluster skips
// it, and naming it is refused with the field and why.
func TestProbeClustersLeavesLocalOnesAlone(t *testing.T) {
	// edge has no kubeconfig: its probe fails, as a real one that cannot
	// connect does.
	a := apitest.Start(t, map[string]string{"local": "local", "edge": "kubernetes"}, apiserver.WithClusterProber(probe.New()))
	cl := falconv1.NewClusterServiceClient(a.Conn)
	ctx := context.Background()

	got, err := cl.ProbeClusters(ctx, &falconv1.ProbeClustersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetItems()) != 1 || got.GetItems()[0].GetCluster() != "edge" || got.GetItems()[0].GetReachable() {
		t.Errorf("probes of every cluster: %v, want edge's alone (unreachable)", got.GetItems())
	}

	_, err = cl.ProbeClusters(ctx, &falconv1.ProbeClustersRequest{Names: []string{"edge", "local"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "names[1]") || !strings.Contains(err.Error(), "not probed") {
		t.Errorf("probing local by name: %v, want InvalidArgument naming names[1]", err)
	}

	st, err := cl.GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetProbe() != nil {
		t.Errorf("local's status holds a probe: %v", st.GetProbe())
	}
}
