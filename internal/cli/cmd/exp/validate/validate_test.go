package validate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

func TestValidate(t *testing.T) {
	api := &clitest.API{
		CreateExpFunc: func(_ context.Context, r *falconv1.CreateExpRequest) (*falconv1.Experiment, error) {
			if !r.GetValidateOnly() {
				return nil, status.Error(codes.Internal, "validate must not create")
			}
			if r.GetExperiment().GetName() == "Bad_Name" {
				return nil, status.Error(codes.InvalidArgument, "name: must be a DNS-1123 label, got \"Bad_Name\"")
			}
			e := proto.Clone(r.GetExperiment()).(*falconv1.Experiment)
			e.ClusterName = "local" // the server fills defaults
			return e, nil
		},
	}
	url := clitest.Start(t, api)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "name: ok\nrole_to_task_spec:\n  w: {command: x, replica: 1}\n")

	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdValidate(f, nil), "-f", good); err != nil {
		t.Fatal(err)
	}
	if s.Out.String() != "manifest is valid\n" {
		t.Errorf("table output = %q", s.Out)
	}

	f, s = clitest.NewFactory(t, url, output.JSON)
	if err := clitest.Execute(NewCmdValidate(f, nil), "-f", good); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil || got["cluster_name"] != "local" {
		t.Errorf("json output = %s (%v), want the would-be experiment", s.Out, err)
	}

	tests := []struct {
		name, file, want string
	}{
		{"server rule", write("server.yaml", "name: Bad_Name\n"), "name: must be a DNS-1123 label"},
		{"local structure", write("local.yaml", "name: ok\nextra: 1\n"), "local.yaml: extra: unknown field"},
		{"malformed", write("broken.yaml", "name: [oops\n"), "broken.yaml: manifest: malformed YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, s := clitest.NewFactory(t, url, output.Table)
			err := clitest.Execute(NewCmdValidate(f, nil), "-f", tt.file)
			if errdefs.ExitCode(errdefs.Code(err)) != errdefs.ExitInvalid {
				t.Errorf("error %v does not exit %d", err, errdefs.ExitInvalid)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if s.Out.Len() != 0 {
				t.Errorf("stdout = %q", s.Out)
			}
		})
	}
	for _, r := range api.Requests("CreateExp") {
		if !r.(*falconv1.CreateExpRequest).GetValidateOnly() {
			t.Error("a CreateExp without validate_only was sent")
		}
	}

	f, _ = clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdValidate(f, nil)); err == nil || !strings.Contains(err.Error(), "filename") {
		t.Errorf("without -f: %v, want a required-flag error", err)
	}
}
