package get

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/output"
)

func newAPI() *clitest.API {
	return &clitest.API{
		GetExpFunc: func(_ context.Context, r *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
			if r.GetId() != "exp-q7odgo8q9x" {
				return nil, status.Errorf(codes.NotFound, "experiment %q not found", r.GetId())
			}
			return &falconv1.Experiment{
				Id: r.GetId(), Name: "bench", ExpType: "benchmark", Status: "Running",
				Jobs: []*falconv1.Job{{Id: "job-ki5t2jegpi", Role: "worker", Status: "Pending", Reason: "Provisioning", Message: "creating node pool", Replica: 2}},
			}, nil
		},
	}
}

func TestGet(t *testing.T) {
	url := clitest.Start(t, newAPI())

	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdGet(f, nil), "exp-q7odgo8q9x"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ID:", "exp-q7odgo8q9x", "Status:", "Running", "Jobs:", "job-ki5t2jegpi", "Provisioning", "creating node pool"} {
		if !strings.Contains(s.Out.String(), want) {
			t.Errorf("table output lacks %q:\n%s", want, s.Out)
		}
	}

	f, s = clitest.NewFactory(t, url, output.JSON)
	if err := clitest.Execute(NewCmdGet(f, nil), "exp-q7odgo8q9x"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status  string `json:"status"`
		ExpType string `json:"exp_type"`
		Jobs    []struct {
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "Running" || got.ExpType != "benchmark" || got.Jobs[0].Reason != "Provisioning" {
		t.Errorf("json = %+v", got)
	}

	f, _ = clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdGet(f, nil), "exp-0000000000")
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown id: %v, want NotFound", err)
	}
	if err := clitest.Execute(NewCmdGet(f, nil)); err == nil {
		t.Error("no ID: want a usage error")
	}
}
