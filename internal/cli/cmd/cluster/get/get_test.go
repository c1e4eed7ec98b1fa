package get

import (
	"context"
	"encoding/json"
	"testing"

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
			return &falconv1.Cluster{Id: "cl-2222222222", Name: "v7x-east", Backend: "gke", GcsBucket: "b", AcceleratorTypes: []string{"v7x"}, Status: "active"}, nil
		},
	}
	url := clitest.Start(t, api)
	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdGet(f, nil), "v7x-east"); err != nil {
		t.Fatal(err)
	}
	want := "Name:          v7x-east\nID:            cl-2222222222\nBackend:       gke\nAccelerators:  v7x\nGCS bucket:    b\nStatus:        active\n"
	if s.Out.String() != want {
		t.Errorf("output = %q\nwant     %q", s.Out, want)
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
