package apply

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

const registry = `clusters:
  tpu-east:
    provider: gke
    project: p
    zone: us-east5-a
    cluster_id: tpu-east
    accelerator_types:
      - {type: v7x, device_class: tpu, priority: 1}
    gcs_bucket: gs://tpu-east
  lab:
    provider: kubernetes
    kubeconfig: /etc/falcon/kubeconfig
    context: lab
`

func TestNewCmdApplyFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Options
		wantErr string
	}{
		{name: "file", args: []string{"-f", "c.yaml"}, want: Options{Filename: "c.yaml"}},
		{name: "prune dry run", args: []string{"--filename", "-", "--prune", "--dry-run"}, want: Options{Filename: "-", Prune: true, DryRun: true}},
		{name: "no file", args: []string{"--prune"}, wantErr: "-f/--filename: required"},
		{name: "positional file", args: []string{"c.yaml"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
			var got *Options
			err := clitest.Execute(NewCmdApply(f, func(_ context.Context, o *Options) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Filename != tt.want.Filename || got.Prune != tt.want.Prune || got.DryRun != tt.want.DryRun {
				t.Errorf("options = %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestApplySendsFileAndPrintsChanges(t *testing.T) {
	resp := &falconv1.ApplyClustersResponse{
		Changes: []*falconv1.ClusterChange{
			{Name: "busy", Action: "offline", Fields: []string{"status"}},
			{Name: "lab", Action: "updated", Fields: []string{"kube_context", "labels"}},
			{Name: "old", Action: "deleted"},
			{Name: "tpu-east", Action: "created"},
		},
		Items: []*falconv1.Cluster{{Name: "busy"}, {Name: "lab"}, {Name: "tpu-east"}},
	}
	api := &clitest.API{ApplyClustersFunc: func(context.Context, *falconv1.ApplyClustersRequest) (*falconv1.ApplyClustersResponse, error) {
		return resp, nil
	}}
	url := clitest.Start(t, api)
	path := writeFile(t, "clusters.yaml", registry)

	f, s := clitest.NewFactory(t, url, output.Table)
	if err := clitest.Execute(NewCmdApply(f, nil), "-f", path, "--prune"); err != nil {
		t.Fatal(err)
	}
	want := &falconv1.ApplyClustersRequest{Prune: true, Selection: "spread", Clusters: []*falconv1.Cluster{
		{Name: "lab", Backend: "kubernetes", Kubeconfig: "/etc/falcon/kubeconfig", KubeContext: "lab", Status: "active"},
		{Name: "tpu-east", Backend: "gke", Project: "p", Location: "us-east5-a", GkeCluster: "tpu-east", GcsBucket: "tpu-east", Status: "active",
			Accelerators: []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1, DeviceClass: "tpu"}}, AcceleratorTypes: []string{"v7x"}},
	}}
	if diff := cmp.Diff(want, api.Requests("ApplyClusters")[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	wantOut := `NAME      ACTION   FIELDS
busy      offline  status
lab       updated  kube_context,labels
old       deleted  -
tpu-east  created  -
`
	if diff := cmp.Diff(wantOut, s.Out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	wantNotes := "Applied: 1 created, 1 updated, 1 offline, 1 deleted.\n" +
		"Not deleted, because jobs that have not finished use them (taken offline instead): busy. Apply with --prune again once they end.\n"
	if diff := cmp.Diff(wantNotes, s.ErrOut.String()); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}

	// JSON is the response, from stdin.
	f, s = clitest.NewFactory(t, url, output.JSON)
	s.In.WriteString(registry)
	if err := clitest.Execute(NewCmdApply(f, nil), "-f", "-", "--dry-run"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Changes []struct{ Name, Action string } `json:"changes"`
		Items   []map[string]any                `json:"items"`
	}
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil || len(got.Changes) != 4 || got.Changes[2].Action != "deleted" || len(got.Items) != 3 {
		t.Errorf("json = %s (%v)", s.Out, err)
	}
	if r := api.Requests("ApplyClusters")[1].(*falconv1.ApplyClustersRequest); !r.GetDryRun() || r.GetPrune() {
		t.Errorf("second request: dry_run %v, prune %v", r.GetDryRun(), r.GetPrune())
	}
}

func TestApplyRefusesBadFile(t *testing.T) {
	api := &clitest.API{}
	url := clitest.Start(t, api)
	bad := strings.Replace(registry, "    cluster_id: tpu-east\n", "", 1) + "  Lab2:\n    provider: local\n    zone: x\n"
	f, _ := clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdApply(f, nil), "-f", writeFile(t, "clusters.yaml", bad))
	if errdefs.Code(err) != codes.InvalidArgument {
		t.Fatalf("error = %v, want InvalidArgument", err)
	}
	for _, w := range []string{
		"clusters.yaml: 2 problems:",
		"\n  clusters.tpu-east.cluster_id: is required for provider gke (line 2)",
		"\n  clusters.Lab2: \"Lab2\" must be a DNS-1123 label",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if n := len(api.Calls()); n != 0 {
		t.Errorf("%d calls for a refused file, want none", n)
	}
}

// Against a real API server: apply, re-apply, dry-run, then prune.
func TestApplyRealServer(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "kubernetes"})
	path := writeFile(t, "clusters.yaml", registry)
	run := func(args ...string) (string, string) {
		t.Helper()
		f, s := clitest.NewFactory(t, "http://"+env.HTTPAddr, output.Table)
		if err := clitest.Execute(NewCmdApply(f, nil), append([]string{"-f", path}, args...)...); err != nil {
			t.Fatal(err)
		}
		return s.Out.String(), s.ErrOut.String()
	}

	out, notes := run()
	if want := "NAME      ACTION   FIELDS\nlab       created  -\nlocal     offline  status\ntpu-east  created  -\n"; out != want {
		t.Errorf("first apply:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(notes, "Not in the file, so offline: local.") {
		t.Errorf("notes = %q", notes)
	}

	out, _ = run()
	if want := "NAME      ACTION     FIELDS\nlab       unchanged  -\nlocal     offline    -\ntpu-east  unchanged  -\n"; out != want {
		t.Errorf("re-apply:\n%s\nwant:\n%s", out, want)
	}

	out, notes = run("--prune", "--dry-run")
	if !strings.Contains(out, "local     deleted    -") || !strings.Contains(notes, "Dry run: would be 2 unchanged, 1 deleted; nothing was written.") {
		t.Errorf("dry-run prune:\n%s%s", out, notes)
	}
	run("--prune")
	clusters, err := falconv1.NewClusterServiceClient(env.UserConn).ListClusters(context.Background(), &falconv1.ListClustersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(clusters.GetItems()); n != 2 || clusters.GetSelection() != "spread" {
		t.Errorf("%d clusters, selection %q after prune, want 2, spread", n, clusters.GetSelection())
	}

	// The file's selection: reaches the registry, and its change is said.
	path = writeFile(t, "clusters.yaml", "selection: priority\n"+registry)
	if _, notes := run(); !strings.Contains(notes, "Applied: 2 unchanged, selection priority (was spread).") {
		t.Errorf("notes of the selection change = %q", notes)
	}
	clusters, err = falconv1.NewClusterServiceClient(env.UserConn).ListClusters(context.Background(), &falconv1.ListClustersRequest{})
	if err != nil || clusters.GetSelection() != "priority" {
		t.Errorf("selection after apply = %q, %v; want priority", clusters.GetSelection(), err)
	}
}

// A selection that is no policy is refused before anything is sent,
// naming the key, its line and the allowed values.
func TestApplyRefusesBadSelection(t *testing.T) {
	api := &clitest.API{}
	url := clitest.Start(t, api)
	f, _ := clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdApply(f, nil), "-f", writeFile(t, "clusters.yaml", "selection: fastest\n"+registry))
	if errdefs.Code(err) != codes.InvalidArgument {
		t.Fatalf("error = %v, want InvalidArgument", err)
	}
	if want := `clusters.yaml: selection: "fastest": allowed values are spread (the default) and priority (line 1)`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if n := len(api.Calls()); n != 0 {
		t.Errorf("%d calls for a refused file, want none", n)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
