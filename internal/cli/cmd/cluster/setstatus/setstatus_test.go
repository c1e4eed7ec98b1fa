package setstatus

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

func TestSetStatus(t *testing.T) {
	api := &clitest.API{
		SetClusterStatusFunc: func(_ context.Context, r *falconv1.SetClusterStatusRequest) (*falconv1.Cluster, error) {
			if r.GetName() != "tpu-east" {
				return nil, status.Errorf(codes.NotFound, "cluster %q not found", r.GetName())
			}
			return &falconv1.Cluster{Id: "cl-2222222222", Name: r.GetName(), Backend: "gke", Status: r.GetStatus()}, nil
		},
	}
	url := clitest.Start(t, api)

	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdSetStatus(f, nil), "tpu-east", "Maintenance"); err != nil {
		t.Fatal(err)
	}
	if got := s.Out.String(); got != "Cluster tpu-east is maintenance\n" {
		t.Errorf("output = %q", got)
	}
	if !strings.Contains(s.ErrOut.String(), "receives no new jobs") {
		t.Errorf("notes = %q", s.ErrOut)
	}
	req := api.Requests("SetClusterStatus")[0].(*falconv1.SetClusterStatusRequest)
	if req.GetName() != "tpu-east" || req.GetStatus() != "maintenance" {
		t.Errorf("request = %v, want tpu-east maintenance (the status lower-cased)", req)
	}

	f, s = clitest.NewFactory(t, url, output.JSON)
	if err := clitest.Execute(NewCmdSetStatus(f, nil), "tpu-east", "active"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil || got["status"] != "active" || s.ErrOut.Len() != 0 {
		t.Errorf("json = %s, stderr %q (%v)", s.Out, s.ErrOut, err)
	}

	if err := clitest.Execute(NewCmdSetStatus(f, nil), "mars", "offline"); status.Code(err) != codes.NotFound {
		t.Errorf("unknown cluster: %v, want NotFound", err)
	}
	calls := len(api.Calls())
	err := clitest.Execute(NewCmdSetStatus(f, nil), "tpu-east", "drained")
	if errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"drained" is not a cluster status; allowed: active, maintenance, offline`) {
		t.Errorf("bad status: %v", err)
	}
	if err := clitest.Execute(NewCmdSetStatus(f, nil), "tpu-east"); err == nil {
		t.Errorf("one argument: no error")
	}
	if n := len(api.Calls()); n != calls {
		t.Errorf("bad arguments reached the server (%d calls, want %d)", n, calls)
	}
}
