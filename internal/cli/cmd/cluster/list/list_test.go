package list

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/output"
)

func TestList(t *testing.T) {
	clusters := []*falconv1.Cluster{
		{Id: "cl-v5l8pq8yso", Name: "local", Backend: "local", Status: "active"},
		{Id: "cl-2222222222", Name: "v7x-east", Backend: "gke", Project: "p", Location: "us-east5", AcceleratorTypes: []string{"v7x", "v6e"}, Status: "maintenance", Namespace: "falcon"},
	}
	api := &clitest.API{
		ListClustersFunc: func(context.Context, *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
			return &falconv1.ListClustersResponse{Items: clusters}, nil
		},
	}
	url := clitest.Start(t, api)
	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdList(f, nil)); err != nil {
		t.Fatal(err)
	}
	want := "NAME      ID             BACKEND  STATUS       ACCELERATORS  NAMESPACE  LOCATION\n" +
		"local     cl-v5l8pq8yso  local    active       -             -          -\n" +
		"v7x-east  cl-2222222222  gke      maintenance  v7x,v6e       falcon     us-east5\n"
	if diff := cmp.Diff(want, s.Out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	empty := &clitest.API{ListClustersFunc: func(context.Context, *falconv1.ListClustersRequest) (*falconv1.ListClustersResponse, error) {
		return &falconv1.ListClustersResponse{}, nil
	}}
	f, s = clitest.NewFactory(t, clitest.Start(t, empty), output.JSON)
	if err := clitest.Execute(NewCmdList(f, nil)); err != nil {
		t.Fatal(err)
	}
	if s.Out.String() != "{\n  \"items\": [],\n  \"selection\": \"\"\n}\n" {
		t.Errorf("empty json = %q", s.Out)
	}
}

func TestStatusShowsUnreachable(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	probed := timestamppb.New(now.Add(-2 * time.Minute))
	active := &falconv1.Cluster{Name: "a", Status: "active"}
	tests := []struct {
		name  string
		c     *falconv1.Cluster
		probe *falconv1.ClusterProbe
		want  string
	}{
		{"never probed", active, nil, "active"},
		{"reachable", active, &falconv1.ClusterProbe{Reachable: true, ProbedAt: probed}, "active"},
		{"unreachable is not plainly active", active, &falconv1.ClusterProbe{Error: "probe timed out after 15s", ProbedAt: probed}, "active (unreachable 2m ago)"},
		{"maintenance stays maintenance", &falconv1.Cluster{Status: "maintenance"}, &falconv1.ClusterProbe{ProbedAt: probed}, "maintenance"},
	}
	for _, tt := range tests {
		if got := Status(now, tt.c, tt.probe); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
