package list

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	if s.Out.String() != "{\n  \"items\": []\n}\n" {
		t.Errorf("empty json = %q", s.Out)
	}
}
