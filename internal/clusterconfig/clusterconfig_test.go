package clusterconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/errdefs"
)

// design001 is the example of design 001 ("1. ClusterRegistry"), with its
// accelerator types written as Falcon names them: Falcon separates the type
// (v5p) from the slice size (the job's topology), and knows no v4.
const design001 = `
clusters:
  tpu-v4-prod:
    provider: gke
    project: primatrix-tpu
    zone: us-central2-b
    cluster_id: tpu-v4-cluster
    accelerator_types:
      - type: tpu-v5p
        device_class: tpu
        priority: 1
      - type: tpu-v6e
        device_class: tpu
        priority: 1
    default_namespace: default
    gcs_bucket: gs://falcon-tpu-v4
    max_queue_depth: 5
    probe_timeout_s: 15
    labels:
      env: prod
      team: pretrain

  gpu-a100:
    provider: gke
    project: primatrix-gpu
    zone: us-central1-a
    cluster_id: gpu-cluster
    accelerator_types:
      - type: nvidia-a100-80gb
        device_class: gpu
        priority: 1
    default_namespace: benchmark
    gcs_bucket: gs://falcon-gpu
    max_queue_depth: 5
    probe_timeout_s: 15
    labels:
      env: prod
      team: gpu
`

func design001Clusters() []*falconv1.Cluster {
	return []*falconv1.Cluster{
		{
			Name: "gpu-a100", Backend: "gke", Project: "primatrix-gpu", Location: "us-central1-a", GkeCluster: "gpu-cluster",
			Accelerators:     []*falconv1.AcceleratorSlot{{Type: "nvidia-a100-80gb", Priority: 1, DeviceClass: "gpu"}},
			AcceleratorTypes: []string{"nvidia-a100-80gb"},
			Namespace:        "benchmark", GcsBucket: "falcon-gpu", MaxQueueDepth: 5, ProbeTimeoutS: 15, Status: "active",
			Labels: map[string]string{"env": "prod", "team": "gpu"},
		},
		{
			Name: "tpu-v4-prod", Backend: "gke", Project: "primatrix-tpu", Location: "us-central2-b", GkeCluster: "tpu-v4-cluster",
			// Canonical names, ordered by priority then name.
			Accelerators:     []*falconv1.AcceleratorSlot{{Type: "v5p", Priority: 1, DeviceClass: "tpu"}, {Type: "v6e", Priority: 1, DeviceClass: "tpu"}},
			AcceleratorTypes: []string{"v5p", "v6e"},
			Namespace:        "default", GcsBucket: "falcon-tpu-v4", MaxQueueDepth: 5, ProbeTimeoutS: 15, Status: "active",
			Labels: map[string]string{"env": "prod", "team": "pretrain"},
		},
	}
}

func TestParseDesign001(t *testing.T) {
	got, err := clusterconfig.Parse([]byte(design001))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(design001Clusters(), got, protocmp.Transform()); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}

	// Loading twice gives the same clusters, not duplicates (001: 重复加载).
	again, err := clusterconfig.Parse([]byte(design001))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, again, protocmp.Transform()); diff != "" {
		t.Errorf("second Parse (-first +second):\n%s", diff)
	}
}

// The design's own type names are refused, naming the types Falcon knows.
func TestParseDesign001VerbatimTypes(t *testing.T) {
	verbatim := strings.NewReplacer("type: tpu-v5p", "type: tpu-v4-64", "type: tpu-v6e", "type: tpu-v4-128").Replace(design001)
	_, err := clusterconfig.Parse([]byte(verbatim))
	fe := fieldErrors(t, err)
	want := []string{"clusters.tpu-v4-prod.accelerator_types[0].type", "clusters.tpu-v4-prod.accelerator_types[1].type"}
	if diff := cmp.Diff(want, fields(fe)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if !strings.Contains(fe[0].Detail, `unknown device type "tpu-v4-64"; known types: v5e, v5p`) {
		t.Errorf("detail = %q", fe[0].Detail)
	}
}

func TestParseExampleFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "clusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := clusterconfig.Parse(data, clusterconfig.WithHomeDir("/home/op"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.GetName())
	}
	if diff := cmp.Diff([]string{"gpu-a100", "lab-h100", "local", "tpu-v5p-prod"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	lab := got[1]
	want := &falconv1.Cluster{
		Name: "lab-h100", Backend: "kubernetes", Kubeconfig: "/home/op/.kube/config", KubeContext: "lab-h100",
		Accelerators:     []*falconv1.AcceleratorSlot{{Type: "nvidia-h100-80gb", Priority: 2, DeviceClass: "gpu"}},
		AcceleratorTypes: []string{"nvidia-h100-80gb"}, Namespace: "falcon", Status: "maintenance",
	}
	if diff := cmp.Diff(want, lab, protocmp.Transform()); diff != "" {
		t.Errorf("lab-h100 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&falconv1.Cluster{Name: "local", Backend: "local", Status: "active"}, got[2], protocmp.Transform()); diff != "" {
		t.Errorf("local (-want +got):\n%s", diff)
	}
}

func TestParseForms(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *falconv1.Cluster
	}{
		{
			name: "kubernetes with default kubeconfig, location key, bare bucket, zero depth",
			yaml: `
clusters:
  edge:
    provider: kubernetes
    context: kind-edge
    location: eu-west4
    gcs_bucket: bkt
    max_queue_depth: 0
    default_reservation: res-1
`,
			want: &falconv1.Cluster{Name: "edge", Backend: "kubernetes", KubeContext: "kind-edge", Location: "eu-west4",
				GcsBucket: "bkt", DefaultReservation: "res-1", Status: "active"},
		},
		{
			name: "tilde kubeconfig and default priority",
			yaml: `
clusters:
  edge:
    provider: kubernetes
    kubeconfig: ~/kube/edge.yaml
    context: edge
    accelerator_types:
      - type: nvidia-l4
      - {type: cpu, priority: 3}
`,
			want: &falconv1.Cluster{Name: "edge", Backend: "kubernetes", Kubeconfig: "/home/op/kube/edge.yaml", KubeContext: "edge",
				Accelerators:     []*falconv1.AcceleratorSlot{{Type: "nvidia-l4", Priority: 1}, {Type: "cpu", Priority: 3}},
				AcceleratorTypes: []string{"nvidia-l4", "cpu"}, Status: "active"},
		},
		{
			name: "null fields are unset",
			yaml: `
clusters:
  l:
    provider: local
    labels:
    status:
    accelerator_types:
`,
			want: &falconv1.Cluster{Name: "l", Backend: "local", Status: "active"},
		},
		{
			name: "service account, a DNS-1123 subdomain",
			yaml: `
clusters:
  tpu:
    provider: gke
    project: p
    zone: us-east5-a
    cluster_id: tpu
    default_namespace: falcon
    service_account: falcon-jobs.v2
    gcs_bucket: gs://bkt
`,
			want: &falconv1.Cluster{Name: "tpu", Backend: "gke", Project: "p", Location: "us-east5-a", GkeCluster: "tpu",
				Namespace: "falcon", ServiceAccount: "falcon-jobs.v2", GcsBucket: "bkt", Status: "active"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := clusterconfig.ParseOne([]byte(tt.yaml), clusterconfig.WithHomeDir("/home/op"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("ParseOne (-want +got):\n%s", diff)
			}
		})
	}
}

// The registry's selection policy: spread unless the file says priority.
func TestParseRegistrySelection(t *testing.T) {
	for _, tt := range []struct{ head, want string }{
		{"", "spread"},
		{"selection: spread\n", "spread"},
		{"selection: priority\n", "priority"},
	} {
		r, err := clusterconfig.ParseRegistry([]byte(tt.head + design001))
		if err != nil {
			t.Fatalf("ParseRegistry(%q...): %v", tt.head, err)
		}
		if r.Selection != tt.want || len(r.Clusters) != 2 {
			t.Errorf("ParseRegistry(%q...) = selection %q, %d clusters; want %q, 2", tt.head, r.Selection, len(r.Clusters), tt.want)
		}
	}
	// create registers one cluster and changes no registry setting: a
	// selection it would drop is refused, not ignored.
	_, err := clusterconfig.ParseOne([]byte("selection: priority\nclusters:\n  l: {provider: local}\n"))
	if fe := fieldErrors(t, err); len(fe) != 1 || fe[0].Field != "selection" || !strings.Contains(fe[0].Detail, "falcon cluster apply") {
		t.Errorf("ParseOne(with selection) = %v", err)
	}
}

func TestParseOneRefusesSeveral(t *testing.T) {
	_, err := clusterconfig.ParseOne([]byte(design001))
	fe := fieldErrors(t, err)
	if len(fe) != 1 || fe[0].Field != "clusters" || !strings.Contains(fe[0].Detail, "holds 2 clusters; create takes one") {
		t.Errorf("ParseOne(two clusters) = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// want are the error paths and, for each, a part of its message.
		want [][2]string
	}{
		{"empty file", "", [][2]string{{"clusters", "is required"}}},
		{"only a comment", "# nothing\n", [][2]string{{"clusters", "is required"}}},
		{"malformed", "clusters: [\n", [][2]string{{"file", "malformed YAML"}}},
		{"two documents", "clusters: {}\n---\nclusters: {}\n", [][2]string{{"file", "more than one YAML document"}}},
		{"not a mapping", "- a\n", [][2]string{{"file", "must be a mapping, got a list"}}},
		{"no clusters key", "cluster:\n  a: {provider: local}\n", [][2]string{
			{"cluster", "unknown field; did you mean clusters? allowed: clusters, selection (line 1)"},
			{"clusters", "is required"},
		}},
		{"clusters null", "clusters:\n", [][2]string{{"clusters", "is required: map each cluster name"}}},
		{"clusters empty", "clusters: {}\n", [][2]string{{"clusters", "names no cluster"}}},
		{"clusters a list", "clusters: [a]\n", [][2]string{{"clusters", "must be a mapping, got a list"}}},
		{
			name: "gke missing project, zone and cluster_id (001: ClusterConfigError)",
			yaml: "clusters:\n  tpu-v4-prod:\n    provider: gke\n",
			want: [][2]string{
				{"clusters.tpu-v4-prod.project", "is required for provider gke (line 2)"},
				{"clusters.tpu-v4-prod.zone", "is required for provider gke (line 2)"},
				{"clusters.tpu-v4-prod.cluster_id", "is required for provider gke (line 2)"},
			},
		},
		{
			name: "location written: its name is used",
			yaml: "clusters:\n  g:\n    provider: gke\n    project: p\n    cluster_id: c\n    location:\n",
			want: [][2]string{{"clusters.g.location", "is required for provider gke (line 6)"}},
		},
		{
			name: "kubernetes needs a context",
			yaml: "clusters:\n  k:\n    provider: kubernetes\n    kubeconfig: /etc/kube\n",
			want: [][2]string{{"clusters.k.context", "is required for provider kubernetes (line 2)"}},
		},
		{
			name: "missing provider",
			yaml: "clusters:\n  k:\n    project: p\n",
			want: [][2]string{{"clusters.k.provider", "is required; one of local, kubernetes, gke"}},
		},
		{
			name: "unknown provider",
			yaml: "clusters:\n  k:\n    provider: aws\n",
			want: [][2]string{{"clusters.k.provider", `"aws" is not a backend; one of local, kubernetes, gke, xpk (line 3)`}},
		},
		{
			name: "fields of another provider",
			yaml: "clusters:\n  l:\n    provider: local\n    context: c\n    cluster_id: g\n  k:\n    provider: kubernetes\n    context: c\n    cluster_id: g\n",
			want: [][2]string{
				{"clusters.l.context", "is only for provider kubernetes, not local (line 4)"},
				{"clusters.l.cluster_id", "is only for provider gke or xpk, not local (line 5)"},
				{"clusters.k.cluster_id", "is only for provider gke or xpk, not kubernetes (line 9)"},
			},
		},
		{
			name: "zone and location",
			yaml: "clusters:\n  g:\n    provider: gke\n    project: p\n    cluster_id: c\n    zone: a\n    location: b\n",
			want: [][2]string{{"clusters.g.location", "give zone or location, not both (zone is set above) (line 7)"}},
		},
		{
			name: "unknown key names the allowed ones",
			yaml: "clusters:\n  l:\n    provider: local\n    namespace: x\n",
			want: [][2]string{{"clusters.l.namespace", "unknown field; allowed: provider, project, zone, location, cluster_id, kubeconfig, context, accelerator_types, default_namespace, service_account, gcs_bucket"}},
		},
		{
			name: "bad names",
			yaml: "clusters:\n  TPU_prod:\n    provider: local\n  " + strings.Repeat("a", 64) + ":\n    provider: local\n",
			want: [][2]string{
				{"clusters.TPU_prod", `"TPU_prod" must be a DNS-1123 label`},
				{"clusters." + strings.Repeat("a", 64), "must be a DNS-1123 label"},
			},
		},
		{
			name: "duplicate names",
			yaml: "clusters:\n  a:\n    provider: local\n  a:\n    provider: local\n",
			want: [][2]string{{"clusters.a", "duplicate key (first at line 2) (line 4)"}},
		},
		{
			name: "wrong types",
			yaml: `clusters:
  a:
    provider: [gke]
    max_queue_depth: "5"
    labels: [x]
    accelerator_types: v7x
  b:
    provider: local
    probe_timeout_s: 1.5
    labels: {team: {x: y}}
    accelerator_types: [v7x, {type: v6e, priority: high}]
`,
			want: [][2]string{
				{"clusters.a.provider", "must be a string, got a list (line 3)"},
				{"clusters.a.max_queue_depth", `must be an integer, got "5" (line 4)`},
				{"clusters.a.labels", "must be a mapping, got a list (line 5)"},
				{"clusters.a.accelerator_types", `must be a list of {type, device_class, priority}, got "v7x" (line 6)`},
				{"clusters.b.probe_timeout_s", "must be an integer, got 1.5 (line 9)"},
				{"clusters.b.labels.team", "must be a string, got a mapping (line 10)"},
				{"clusters.b.accelerator_types[0]", `must be a mapping, got "v7x" (line 11)`},
				{"clusters.b.accelerator_types[1].priority", `must be an integer, got "high" (line 11)`},
			},
		},
		{
			name: "type errors do not hide the rules' errors, nor repeat them",
			yaml: `clusters:
  tpu-v4-prod:
    provider: gke
    zone: us-central2-b
    max_queue_depth: five
    status: [active]
    accelerator_types:
      - {type: tpu-v4-64, priority: 1}
`,
			want: [][2]string{
				{"clusters.tpu-v4-prod.max_queue_depth", `must be an integer, got "five" (line 5)`},
				{"clusters.tpu-v4-prod.status", "must be a string, got a list (line 6)"},
				{"clusters.tpu-v4-prod.project", "is required for provider gke (line 2)"},
				{"clusters.tpu-v4-prod.cluster_id", "is required for provider gke (line 2)"},
				{"clusters.tpu-v4-prod.accelerator_types[0].type", `unknown device type "tpu-v4-64"`},
			},
		},
		{
			name: "accelerator slots",
			yaml: `clusters:
  a:
    provider: local
    accelerator_types:
      - type: v7x
        device_class: gpu
        priority: 0
      - {type: tpu7x}
      - {device_class: tpu}
      - {type: v6e, device_class: fpga}
      - {type: warp-drive}
      - {type: h100, size: 8}
`,
			want: [][2]string{
				{"clusters.a.accelerator_types[2].type", "is required (line 9)"},
				{"clusters.a.accelerator_types[5].size", "unknown field; allowed: type, device_class, priority (line 12)"},
				// The rules run too, and report what the structure errors did not.
				{"clusters.a.accelerator_types[0].priority", "must be at least 1 (1 is the most preferred), got 0 (line 7)"},
				{"clusters.a.accelerator_types[1].type", "v7x is listed twice (also clusters.a.accelerator_types[0]); give each type once (line 8)"},
				{"clusters.a.accelerator_types[4].type", `unknown device type "warp-drive"`},
				{"clusters.a.accelerator_types[0].device_class", "is gpu, but v7x is a tpu type (line 6)"},
				{"clusters.a.accelerator_types[3].device_class", `"fpga" is not a device class; one of tpu, gpu (line 10)`},
			},
		},
		{
			name: "slot rules alone",
			yaml: `clusters:
  a:
    provider: local
    accelerator_types:
      - type: v7x
        device_class: gpu
        priority: 0
      - {type: tpu7x}
      - {type: warp-drive}
`,
			want: [][2]string{
				{"clusters.a.accelerator_types[0].priority", "must be at least 1 (1 is the most preferred), got 0 (line 7)"},
				{"clusters.a.accelerator_types[1].type", "v7x is listed twice (also clusters.a.accelerator_types[0]); give each type once (line 8)"},
				{"clusters.a.accelerator_types[2].type", `unknown device type "warp-drive"`},
				{"clusters.a.accelerator_types[0].device_class", "is gpu, but v7x is a tpu type (line 6)"},
			},
		},
		{
			name: "values",
			yaml: `clusters:
  a:
    provider: kubernetes
    context: c
    kubeconfig: kube/config
    default_namespace: Falcon
    gcs_bucket: gs://bkt/logs
    max_queue_depth: -1
    status: draining
    probe_timeout_s: -3
    labels:
      "": x
      team: "a b"
  b:
    provider: local
    gcs_bucket: "B"
`,
			want: [][2]string{
				{"clusters.a.kubeconfig", `"kube/config" must be an absolute path on the controller's machine (line 5)`},
				{"clusters.a.default_namespace", `"Falcon" must be a DNS-1123 label (a Kubernetes namespace name) (line 6)`},
				{"clusters.a.gcs_bucket", `"gs://bkt/logs" must be a bucket (name or gs://name), not a path inside one (line 7)`},
				{"clusters.a.status", `"draining" is not a cluster status; allowed: active, maintenance, offline (line 9)`},
				{"clusters.a.max_queue_depth", "must be 0 (no limit) or positive, got -1 (line 8)"},
				{`clusters.a.labels.""`, "key must be at most 63 letters, digits and '-_./', starting and ending with a letter or digit (line 12)"},
				{"clusters.a.labels.team", `value "a b" must be empty or at most 63 letters`},
				{"clusters.a.probe_timeout_s", "must be 0 (the default) or positive, at most 300, got -3 (line 10)"},
				{"clusters.b.gcs_bucket", `"B" is not a GCS bucket name: 3-222 lower-case letters`},
			},
		},
		{
			name: "service account not a DNS-1123 subdomain",
			yaml: "clusters:\n  a:\n    provider: kubernetes\n    context: c\n    service_account: Falcon_Jobs\n" +
				"  b:\n    provider: kubernetes\n    context: c\n    service_account: jobs.\n" +
				"  c:\n    provider: kubernetes\n    context: c\n    service_account: " + strings.Repeat("a", 254) + "\n" +
				"  d:\n    provider: kubernetes\n    context: c\n    service_account: [jobs]\n",
			want: [][2]string{
				{"clusters.a.service_account", `"Falcon_Jobs" must be a DNS-1123 subdomain (a Kubernetes service account name): at most 253 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (line 5)`},
				{"clusters.b.service_account", `"jobs." must be a DNS-1123 subdomain (a Kubernetes service account name)`},
				{"clusters.c.service_account", `aaa" must be a DNS-1123 subdomain (a Kubernetes service account name)`},
				{"clusters.d.service_account", "must be a string, got a list (line 17)"},
			},
		},
		{
			name: "selection not a policy names the key and the allowed values",
			yaml: "selection: fastest\nclusters:\n  l: {provider: local}\n",
			want: [][2]string{{"selection", `"fastest": allowed values are spread (the default) and priority (line 1)`}},
		},
		{
			name: "selection empty",
			yaml: "selection:\nclusters:\n  l: {provider: local}\n",
			want: [][2]string{{"selection", "is empty; allowed values are spread (the default) and priority (line 1)"}},
		},
		{
			name: "selection a list",
			yaml: "selection: [priority]\nclusters:\n  l: {provider: local}\n",
			want: [][2]string{{"selection", "must be a string, got a list (line 1)"}},
		},
		{
			name: "selection under a cluster is a cluster's unknown field",
			yaml: "clusters:\n  l: {provider: local, selection: priority}\n",
			want: [][2]string{{"clusters.l.selection", "unknown field; allowed: provider"}},
		},
		{
			name: "merge keys and non-string keys",
			yaml: "base: &b {provider: local}\nclusters:\n  a:\n    <<: *b\n  ? [x]\n  : {provider: local}\n",
			want: [][2]string{
				{"base", "unknown field; allowed: clusters, selection (line 1)"},
				{"clusters.a.<<", "YAML merge keys are not supported"},
				{"clusters.a.provider", "is required; one of local, kubernetes, gke, xpk (line 3)"},
				{"clusters.?", "keys must be strings, got a list"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := clusterconfig.Parse([]byte(tt.yaml), clusterconfig.WithHomeDir("/home/op"))
			if got != nil {
				t.Errorf("Parse returned clusters %v with an error: the whole file must be refused", got)
			}
			fe := fieldErrors(t, err)
			var wantFields []string
			for _, w := range tt.want {
				wantFields = append(wantFields, w[0])
			}
			if diff := cmp.Diff(wantFields, fields(fe)); diff != "" {
				t.Fatalf("error fields (-want +got):\n%s\nerror: %v", diff, err)
			}
			for i, w := range tt.want {
				if !strings.Contains(fe[i].Detail, w[1]) {
					t.Errorf("%s: detail %q does not contain %q", w[0], fe[i].Detail, w[1])
				}
			}
		})
	}
}

// One bad cluster refuses the file, and the good clusters' problems are
// reported along with it.
func TestParseRefusesWholeFile(t *testing.T) {
	bad := design001 + "\n  broken:\n    provider: gke\n    project: p\n"
	got, err := clusterconfig.Parse([]byte(bad))
	if got != nil {
		t.Errorf("Parse returned %d clusters despite errors", len(got))
	}
	if diff := cmp.Diff([]string{"clusters.broken.zone", "clusters.broken.cluster_id"}, fields(fieldErrors(t, err))); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("error %v is not InvalidArgument", err)
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   *falconv1.Cluster
		want *falconv1.Cluster
		errs []string
	}{
		{
			name: "accelerator_types alone become slots in their order",
			in:   &falconv1.Cluster{Name: "a", Backend: "local", AcceleratorTypes: []string{"tpu7x", "v5e"}},
			want: &falconv1.Cluster{Name: "a", Backend: "local", Status: "active",
				Accelerators:     []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1}, {Type: "v5e", Priority: 2}},
				AcceleratorTypes: []string{"v7x", "v5e"}},
		},
		{
			name: "both forms agreeing (a client echoing a Get)",
			in: &falconv1.Cluster{Name: "a", Backend: "local", AcceleratorTypes: []string{"v5e", "v7x"},
				Accelerators: []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 2}, {Type: "v5e", Priority: 1}}},
			want: &falconv1.Cluster{Name: "a", Backend: "local", Status: "active",
				Accelerators:     []*falconv1.AcceleratorSlot{{Type: "v5e", Priority: 1}, {Type: "v7x", Priority: 2}},
				AcceleratorTypes: []string{"v5e", "v7x"}},
		},
		{
			name: "both forms disagreeing",
			in: &falconv1.Cluster{Name: "a", Backend: "local", AcceleratorTypes: []string{"v7x"},
				Accelerators: []*falconv1.AcceleratorSlot{{Type: "v5e", Priority: 1}}},
			errs: []string{"accelerator_types: is derived from accelerators (v5e); leave it empty"},
		},
		{
			name: "id and created_at are kept for the server",
			in:   &falconv1.Cluster{Id: "cl-1", Name: "a", Backend: "gke", Project: "p", Location: "l", GkeCluster: "g", GcsBucket: "gs://b-1/"},
			want: &falconv1.Cluster{Id: "cl-1", Name: "a", Backend: "gke", Project: "p", Location: "l", GkeCluster: "g", GcsBucket: "b-1", Status: "active"},
		},
		{
			name: "nil is an empty cluster",
			in:   nil,
			errs: []string{"name: is required", "backend: is required; one of local, kubernetes, gke, xpk"},
		},
		{
			name: "API vocabulary in paths and messages",
			in:   &falconv1.Cluster{Name: "a", Backend: "gke", KubeContext: "c", Accelerators: []*falconv1.AcceleratorSlot{{Type: "v7x"}}},
			errs: []string{
				"project: is required for backend gke",
				"location: is required for backend gke",
				"gke_cluster: is required for backend gke",
				"kube_context: is only for backend kubernetes, not gke",
				"accelerators[0].priority: must be at least 1 (1 is the most preferred), got 0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := clusterconfig.Normalize(tt.in)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if diff := cmp.Diff(tt.errs, msgs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindByAccelerator(t *testing.T) {
	clusters := []*falconv1.Cluster{
		{Name: "b-backup", Accelerators: []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 2}}},
		{Name: "z-prod", Accelerators: []*falconv1.AcceleratorSlot{{Type: "v6e", Priority: 3}, {Type: "v7x", Priority: 1}}},
		{Name: "a-prod", Accelerators: []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1}}},
		{Name: "local"}, // offers anything, but lists nothing
		{Name: "legacy", Accelerators: []*falconv1.AcceleratorSlot{{Type: "TPU-V4-64", Priority: 1}}},
	}
	names := func(cs []clusterconfig.Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Cluster.GetName()+":"+string(rune('0'+c.Priority)))
		}
		return out
	}
	tests := []struct {
		typ  string
		want []string
	}{
		{"v7x", []string{"a-prod:1", "z-prod:1", "b-backup:2"}},
		{"tpu7x", []string{"a-prod:1", "z-prod:1", "b-backup:2"}}, // an alias finds the canonical name
		{"v6e", []string{"z-prod:3"}},
		{"tpu-v4-64", []string{"legacy:1"}}, // unknown types match by name
		{"nvidia-b200", nil},
		{"", nil},
	}
	for _, tt := range tests {
		got := clusterconfig.FindByAccelerator(clusters, tt.typ)
		if diff := cmp.Diff(tt.want, names(got)); diff != "" {
			t.Errorf("FindByAccelerator(%q) (-want +got):\n%s", tt.typ, diff)
		}
		if len(got) > 0 && got[0].Cluster != clusters[2] && tt.typ == "v7x" {
			t.Errorf("candidates must point at the given clusters")
		}
	}
	if got := clusterconfig.FindByAccelerator(nil, "v7x"); len(got) != 0 {
		t.Errorf("FindByAccelerator(nil) = %v, want empty", got)
	}

	// On a parsed file, as design 001 queries it.
	parsed, err := clusterconfig.Parse([]byte(design001))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(clusterconfig.FindByAccelerator(parsed, "v6e")); !cmp.Equal(got, []string{"tpu-v4-prod:1"}) {
		t.Errorf("FindByAccelerator(parsed, v6e) = %v", got)
	}
	if got := clusterconfig.FindByAccelerator(parsed, "v7x"); len(got) != 0 {
		t.Errorf("FindByAccelerator(parsed, v7x) = %v, want empty", names(got))
	}
}

func fieldErrors(t *testing.T, err error) errdefs.FieldErrors {
	t.Helper()
	var fe errdefs.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want errdefs.FieldErrors", err, err)
	}
	return fe
}

func fields(fe errdefs.FieldErrors) []string {
	var out []string
	for _, e := range fe {
		out = append(out, e.Field)
	}
	return out
}
