package create

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

func TestNewCmdCreateFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Options
		wantErr string
	}{
		{name: "file", args: []string{"-f", "c.yaml"}, want: Options{Filename: "c.yaml"}},
		{
			name: "flag form",
			args: []string{"--name", "lab", "--backend", "kubernetes", "--context", "ctx", "--kubeconfig", "/k", "--namespace", "ns",
				"--service-account", "sa", "--accelerator", "h100", "--accelerator", "l4:2", "--bucket", "gs://b", "--max-queue-depth", "3",
				"--label", "env=prod", "--label", "team=a", "--status", "maintenance", "--reservation", "r"},
			want: Options{Name: "lab", Backend: "kubernetes", Context: "ctx", Kubeconfig: "/k", Namespace: "ns", ServiceAccount: "sa",
				Accelerators: []string{"h100", "l4:2"}, Bucket: "gs://b", MaxQueueDepth: 3,
				Labels: map[string]string{"env": "prod", "team": "a"}, Status: "maintenance", Reservation: "r"},
		},
		{
			name: "gke flags",
			args: []string{"--name", "g", "--backend", "gke", "--project", "p", "--location", "l", "--gke-cluster", "c"},
			want: Options{Name: "g", Backend: "gke", Project: "p", Location: "l", GKECluster: "c"},
		},
		{name: "-f with a flag", args: []string{"-f", "c.yaml", "--backend", "local"}, wantErr: "--backend: cannot be combined with -f/--filename"},
		{name: "-f with --service-account", args: []string{"-f", "c.yaml", "--service-account", "sa"}, wantErr: "--service-account: cannot be combined with -f/--filename"},
		{name: "nothing", wantErr: "--name: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
			var got *Options
			err := clitest.Execute(NewCmdCreate(f, func(_ context.Context, o *Options) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("error = %v, want InvalidArgument containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(Options{}, "IO", "Client", "Printer"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// echoAPI registers whatever it is sent, with an ID and the active status.
func echoAPI() *clitest.API {
	return &clitest.API{
		RegisterClusterFunc: func(_ context.Context, r *falconv1.RegisterClusterRequest) (*falconv1.Cluster, error) {
			c := proto.Clone(r.GetCluster()).(*falconv1.Cluster)
			c.Id, c.Status = "cl-v5l8pq8yso", "active"
			for _, a := range c.GetAccelerators() {
				c.AcceleratorTypes = append(c.AcceleratorTypes, a.GetType())
			}
			return c, nil
		},
	}
}

func TestCreateFlagForm(t *testing.T) {
	api := echoAPI()
	url := clitest.Start(t, api)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	f, s := clitest.NewFactory(t, url, output.Table)
	err = clitest.Execute(NewCmdCreate(f, nil), "--name", "lab", "--backend", "kubernetes", "--context", "lab-admin",
		"--kubeconfig", "kube/config", "--namespace", "falcon", "--service-account", "falcon-jobs",
		"--accelerator", "nvidia-h100-80gb", "--accelerator", "nvidia-l4:2",
		"--bucket", "gs://lab-bkt", "--max-queue-depth", "4", "--label", "env=lab")
	if err != nil {
		t.Fatal(err)
	}
	want := &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
		Name: "lab", Backend: "kubernetes", KubeContext: "lab-admin",
		Kubeconfig: filepath.Join(wd, "kube/config"), // made absolute: the controller reads it
		Namespace:  "falcon", ServiceAccount: "falcon-jobs",
		GcsBucket: "gs://lab-bkt", MaxQueueDepth: 4, Labels: map[string]string{"env": "lab"},
		Accelerators: []*falconv1.AcceleratorSlot{{Type: "nvidia-h100-80gb", Priority: 1}, {Type: "nvidia-l4", Priority: 2}},
	}}
	reqs := api.Requests("RegisterCluster")
	if len(reqs) != 1 {
		t.Fatalf("RegisterCluster called %d times", len(reqs))
	}
	if diff := cmp.Diff(want, reqs[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if got, w := s.Out.String(), "Registered cluster lab (cl-v5l8pq8yso): kubernetes, active, offering nvidia-h100-80gb, nvidia-l4\n"; got != w {
		t.Errorf("output = %q, want %q", got, w)
	}

	// A local cluster offers anything; -o json prints the cluster.
	f, s = clitest.NewFactory(t, url, output.JSON)
	if err := clitest.Execute(NewCmdCreate(f, nil), "--name", "local", "--backend", "local"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil || got["id"] != "cl-v5l8pq8yso" || got["backend"] != "local" {
		t.Errorf("json = %s (%v)", s.Out, err)
	}
}

func TestCreateFromFile(t *testing.T) {
	api := echoAPI()
	url := clitest.Start(t, api)
	t.Setenv("HOME", "/home/op")
	const file = `clusters:
  tpu-east:
    provider: gke
    project: p
    zone: us-east5-a
    cluster_id: tpu-east
    kubeconfig_unused: x
`
	f, _ := clitest.NewFactory(t, url, output.JSON)
	path := writeFile(t, "bad.yaml", file)
	err := clitest.Execute(NewCmdCreate(f, nil), "-f", path)
	if errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bad.yaml: clusters.tpu-east.kubeconfig_unused: unknown field") {
		t.Errorf("unknown field: %v", err)
	}

	good := strings.Replace(file, "    kubeconfig_unused: x\n", "    accelerator_types: [{type: tpu7x, device_class: tpu}]\n", 1)
	f, s := clitest.NewFactory(t, url, output.JSON)
	s.In.WriteString(good)
	if err := clitest.Execute(NewCmdCreate(f, nil), "-f", "-"); err != nil {
		t.Fatal(err)
	}
	want := &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
		Name: "tpu-east", Backend: "gke", Project: "p", Location: "us-east5-a", GkeCluster: "tpu-east", Status: "active",
		Accelerators: []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1, DeviceClass: "tpu"}}, AcceleratorTypes: []string{"v7x"},
	}}
	reqs := api.Requests("RegisterCluster")
	if len(reqs) != 1 {
		t.Fatalf("RegisterCluster called %d times, want once (the bad file must send nothing)", len(reqs))
	}
	if diff := cmp.Diff(want, reqs[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}

	two := good + "  other:\n    provider: local\n"
	err = clitest.Execute(NewCmdCreate(f, nil), "-f", writeFile(t, "two.yaml", two))
	if errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "holds 2 clusters; create takes one") {
		t.Errorf("two clusters: %v", err)
	}
}

// The registry's rules are checked before anything is sent, and speak in
// flags.
func TestCreateFlagErrors(t *testing.T) {
	api := echoAPI()
	url := clitest.Start(t, api)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			name: "gke without its fields",
			args: []string{"--name", "g", "--backend", "gke"},
			want: []string{"--project: is required for backend gke", "--location: is required", "--gke-cluster: is required"},
		},
		{
			name: "kubernetes without a context",
			args: []string{"--name", "k", "--backend", "kubernetes", "--kubeconfig", "/k"},
			want: []string{"--context: is required for backend kubernetes"},
		},
		{
			name: "bad accelerators",
			args: []string{"--name", "k", "--backend", "local", "--accelerator", "v7x:0", "--accelerator", ":3", "--accelerator", "h100:x"},
			want: []string{
				`--accelerator: "v7x:0": the priority after ':' must be a whole number, at least 1`,
				`--accelerator: ":3" must be TYPE or TYPE:PRIORITY`,
				`--accelerator: "h100:x": the priority`,
			},
		},
		{
			name: "unknown accelerator type and duplicate",
			args: []string{"--name", "k", "--backend", "local", "--accelerator", "v9", "--accelerator", "v7x", "--accelerator", "tpu7x"},
			want: []string{`--accelerator[0]: unknown device type "v9"`, "--accelerator[2]: v7x is listed twice (also --accelerator[1])"},
		},
		{
			name: "name, status, labels, depth",
			args: []string{"--name", "Lab", "--backend", "local", "--status", "down", "--label", "a b=c", "--max-queue-depth", "-2"},
			want: []string{`--name: "Lab" must be a DNS-1123 label`, `--status: "down" is not a cluster status`,
				"--label a b: key must be", "--max-queue-depth: must be 0 (no limit) or positive"},
		},
		{
			name: "service account not a DNS-1123 subdomain",
			args: []string{"--name", "k", "--backend", "kubernetes", "--context", "c", "--service-account", "Falcon_Jobs"},
			want: []string{`--service-account: "Falcon_Jobs" must be a DNS-1123 subdomain (a Kubernetes service account name)`},
		},
		{
			name: "no backend",
			args: []string{"--name", "lab"},
			want: []string{"--backend: is required; one of local, kubernetes, gke"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, url, output.JSON)
			err := clitest.Execute(NewCmdCreate(f, nil), tt.args...)
			if errdefs.Code(err) != codes.InvalidArgument {
				t.Fatalf("error = %v, want InvalidArgument", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if n := len(api.Requests("RegisterCluster")); n != 0 {
		t.Errorf("RegisterCluster called %d times for bad input", n)
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
