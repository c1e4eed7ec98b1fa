package delete

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

func TestDelete(t *testing.T) {
	api := &clitest.API{
		DeleteExpFunc: func(_ context.Context, r *falconv1.DeleteExpRequest) (*falconv1.DeleteExpResponse, error) {
			if r.GetId() == "exp-running" {
				return nil, status.Error(codes.FailedPrecondition, "abort exp-running before deleting it")
			}
			return &falconv1.DeleteExpResponse{Id: r.GetId()}, nil
		},
	}
	url := clitest.Start(t, api)

	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdDelete(f, nil), "exp-done", "--yes"); err != nil {
		t.Fatal(err)
	}
	if s.Out.String() != "Deleted exp-done\n" {
		t.Errorf("output = %q", s.Out)
	}

	f, s = clitest.NewFactory(t, url, output.JSON)
	if err := clitest.Execute(NewCmdDelete(f, nil), "exp-done", "-y"); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(s.Out.String()) != "{\n  \"id\": \"exp-done\"\n}" {
		t.Errorf("json = %q", s.Out)
	}

	// Without a terminal and without --yes: refused before calling the server.
	f, _ = clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdDelete(f, nil), "exp-done")
	if errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("no --yes: %v", err)
	}

	// On a terminal, "no" deletes nothing.
	f, s = clitest.NewFactory(t, url, output.Table)
	s.IO.SetStdinTTY(true)
	s.In.WriteString("no\n")
	if err := clitest.Execute(NewCmdDelete(f, nil), "exp-done"); err == nil || !strings.Contains(err.Error(), "nothing was deleted") {
		t.Errorf("answered no: %v", err)
	}
	if !strings.Contains(s.ErrOut.String(), "Delete exp-done? [y/N]") {
		t.Errorf("prompt = %q", s.ErrOut)
	}

	f, _ = clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdDelete(f, nil), "exp-running", "--yes"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("server refusal: %v, want FailedPrecondition", err)
	}
	if n := len(api.Requests("DeleteExp")); n != 3 {
		t.Errorf("DeleteExp called %d times, want 3", n)
	}
}
