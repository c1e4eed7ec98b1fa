package get

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/output"
)

func TestGet(t *testing.T) {
	api := &clitest.API{
		GetJobFunc: func(_ context.Context, r *falconv1.GetJobRequest) (*falconv1.Job, error) {
			if r.GetId() != "job-ki5t2jegpi" {
				return nil, status.Error(codes.NotFound, "job not found")
			}
			return &falconv1.Job{
				Id: r.GetId(), ExpId: "exp-q7odgo8q9x", ExpName: "bench", Role: "worker", Status: "Pending",
				Reason: "Waiting", Message: "Insufficient cpu on cluster v7x", Replica: 2,
				TaskSpec:    &falconv1.TaskSpec{DeviceType: "v7x", DeviceCount: 8, DeviceTopo: "2x2x2"},
				ClusterName: "tpu-east", NodePool: "falcon-job-ki5t2jegpi",
			}, nil
		},
	}
	url := clitest.Start(t, api)
	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdGet(f, nil), "job-ki5t2jegpi"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"exp-q7odgo8q9x (bench)", "Insufficient cpu on cluster v7x", "v7x x8 per host, topology 2x2x2", "Node pool:   falcon-job-ki5t2jegpi"} {
		if !strings.Contains(s.Out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, s.Out)
		}
	}
	f, s = clitest.NewFactory(t, url, output.YAML)
	if err := clitest.Execute(NewCmdGet(f, nil), "job-ki5t2jegpi"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Out.String(), "exp_id: exp-q7odgo8q9x\n") || !strings.Contains(s.Out.String(), "status: Pending\n") {
		t.Errorf("yaml:\n%s", s.Out)
	}
	if err := clitest.Execute(NewCmdGet(f, nil), "job-nope"); status.Code(err) != codes.NotFound {
		t.Errorf("unknown job: %v", err)
	}
}
