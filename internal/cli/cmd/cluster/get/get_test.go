package get

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/output"
)

func TestGet(t *testing.T) {
	api := &clitest.API{
		GetClusterFunc: func(_ context.Context, r *falconv1.GetClusterRequest) (*falconv1.Cluster, error) {
			if r.GetName() != "v7x-east" {
				return nil, status.Errorf(codes.NotFound, "cluster %q not found", r.GetName())
			}
			return &falconv1.Cluster{
				Id: "cl-2222222222", Name: "v7x-east", Backend: "gke", Project: "p", Location: "us-east5", GkeCluster: "east",
				GcsBucket: "b", Namespace: "falcon", ServiceAccount: "falcon-jobs", MaxQueueDepth: 4, Status: "maintenance",
				Accelerators:     []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1}, {Type: "v6e", Priority: 2}},
				AcceleratorTypes: []string{"v7x", "v6e"}, Labels: map[string]string{"team": "a", "env": "prod"},
			}, nil
		},
	}
	url := clitest.Start(t, api)
	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdGet(f, nil), "v7x-east"); err != nil {
		t.Fatal(err)
	}
	want := `Name:             v7x-east
ID:               cl-2222222222
Backend:          gke
Status:           maintenance
Accelerators:     v7x (priority 1), v6e (priority 2)
Namespace:        falcon
Service account:  falcon-jobs
Project:          p
Location:         us-east5
GKE cluster:      east
Max queue depth:  4
GCS bucket:       gs://b
Labels:           env=prod, team=a
`
	if diff := cmp.Diff(want, s.Out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	f, s = clitest.NewFactory(t, url, output.JSON)
	if err := clitest.Execute(NewCmdGet(f, nil), "v7x-east"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil || got["gcs_bucket"] != "b" {
		t.Errorf("json = %s", s.Out)
	}
	if err := clitest.Execute(NewCmdGet(f, nil), "mars"); status.Code(err) != codes.NotFound {
		t.Errorf("unknown cluster: %v", err)
	}
}
