package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

const registry = `
clusters:
  tpu-a:
    provider: gke
    project: p
    zone: us-east5-a
    cluster_id: tpu-a
    accelerator_types:
      - {type: v7x, device_class: tpu, priority: 1}
      - {type: tpu-v6e, priority: 2}
    default_namespace: falcon
    gcs_bucket: gs://bkt-a
    max_queue_depth: 4
    labels: {env: prod}
  gpu-b:
    provider: kubernetes
    kubeconfig: /etc/falcon/kubeconfig
    context: lab
    accelerator_types:
      - {type: h100, priority: 1}
`

func parse(t *testing.T, yaml string) []*falconv1.Cluster {
	t.Helper()
	cs, err := clusterconfig.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

type change struct {
	Name, Action string
	Fields       []string
}

func changes(resp *falconv1.ApplyClustersResponse) []change {
	var out []change
	for _, c := range resp.GetChanges() {
		out = append(out, change{c.GetName(), c.GetAction(), c.GetFields()})
	}
	return out
}

func listClusters(t *testing.T, cl falconv1.ClusterServiceClient) []*falconv1.Cluster {
	t.Helper()
	resp, err := cl.ListClusters(context.Background(), &falconv1.ListClustersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetItems()
}

func apply(t *testing.T, cl falconv1.ClusterServiceClient, req *falconv1.ApplyClustersRequest) *falconv1.ApplyClustersResponse {
	t.Helper()
	resp, err := cl.ApplyClusters(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestApplyClusters(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "kubernetes"})
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	before := listClusters(t, cl)

	// A dry run reports what would happen and writes nothing.
	dry := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: parse(t, registry), DryRun: true})
	wantFirst := []change{
		{"gpu-b", "created", nil},
		{"local", "offline", []string{"status"}},
		{"tpu-a", "created", nil},
	}
	if diff := cmp.Diff(wantFirst, changes(dry)); diff != "" {
		t.Errorf("dry run changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, listClusters(t, cl), protocmp.Transform()); diff != "" {
		t.Errorf("dry run wrote (-before +after):\n%s", diff)
	}
	if n := len(dry.GetItems()); n != 3 || dry.GetItems()[1].GetStatus() != "offline" {
		t.Errorf("dry run items = %v, want the three clusters as they would be", dry.GetItems())
	}

	// The real thing.
	resp := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: parse(t, registry)})
	if diff := cmp.Diff(wantFirst, changes(resp)); diff != "" {
		t.Errorf("apply changes (-want +got):\n%s", diff)
	}
	got := listClusters(t, cl)
	if diff := cmp.Diff(got, resp.GetItems(), protocmp.Transform()); diff != "" {
		t.Errorf("response items differ from the registry (-list +items):\n%s", diff)
	}
	tpu := got[2]
	if !ids.Valid(ids.Cluster, tpu.GetId()) || tpu.GetCreatedAt() == nil {
		t.Errorf("tpu-a id %q, created_at %v: want a new cl- ID and a creation time", tpu.GetId(), tpu.GetCreatedAt())
	}
	wantTPU := &falconv1.Cluster{
		Name: "tpu-a", Backend: "gke", Project: "p", Location: "us-east5-a", GkeCluster: "tpu-a",
		Accelerators:     []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1, DeviceClass: "tpu"}, {Type: "v6e", Priority: 2}},
		AcceleratorTypes: []string{"v7x", "v6e"}, Namespace: "falcon", GcsBucket: "bkt-a", MaxQueueDepth: 4,
		Labels: map[string]string{"env": "prod"}, Status: "active",
	}
	if diff := cmp.Diff(wantTPU, tpu, protocmp.Transform(), protocmp.IgnoreFields(&falconv1.Cluster{}, "id", "created_at")); diff != "" {
		t.Errorf("tpu-a as stored (-want +got):\n%s", diff)
	}
	if got[1].GetName() != "local" || got[1].GetStatus() != "offline" {
		t.Errorf("local = %v, want offline: it is not in the file", got[1])
	}

	// Applying the same file again changes nothing; local stays offline.
	again := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: parse(t, registry)})
	wantAgain := []change{{"gpu-b", "unchanged", nil}, {"local", "offline", nil}, {"tpu-a", "unchanged", nil}}
	if diff := cmp.Diff(wantAgain, changes(again)); diff != "" {
		t.Errorf("re-apply changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(got, listClusters(t, cl), protocmp.Transform()); diff != "" {
		t.Errorf("re-apply changed the registry (-before +after):\n%s", diff)
	}

	// Changed fields are named; the ID and creation time stay.
	edited := strings.NewReplacer("max_queue_depth: 4", "max_queue_depth: 8\n    service_account: falcon-jobs",
		"{env: prod}", "{env: staging}", "{type: h100, priority: 1}", "{type: h100, priority: 2}").Replace(registry)
	upd := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: parse(t, edited)})
	wantUpd := []change{
		{"gpu-b", "updated", []string{"accelerators"}},
		{"local", "offline", nil},
		{"tpu-a", "updated", []string{"max_queue_depth", "labels", "service_account"}},
	}
	if diff := cmp.Diff(wantUpd, changes(upd)); diff != "" {
		t.Errorf("edit changes (-want +got):\n%s", diff)
	}
	after := listClusters(t, cl)
	if after[2].GetId() != tpu.GetId() || !after[2].GetCreatedAt().AsTime().Equal(tpu.GetCreatedAt().AsTime()) ||
		after[2].GetMaxQueueDepth() != 8 || after[2].GetServiceAccount() != "falcon-jobs" {
		t.Errorf("tpu-a after edit = %v; want the same ID and created_at, max_queue_depth 8, service_account falcon-jobs", after[2])
	}

	// A status set by hand is reverted by the file, and reported.
	if _, err := cl.SetClusterStatus(context.Background(), &falconv1.SetClusterStatusRequest{Name: "tpu-a", Status: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	back := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: parse(t, edited)})
	if diff := cmp.Diff(change{"tpu-a", "updated", []string{"status"}}, changes(back)[2]); diff != "" {
		t.Errorf("re-apply after set-status (-want +got):\n%s", diff)
	}

	// Prune deletes what the file no longer lists and nothing runs on.
	pruned := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: parse(t, edited), Prune: true})
	wantPruned := []change{{"gpu-b", "unchanged", nil}, {"local", "deleted", nil}, {"tpu-a", "unchanged", nil}}
	if diff := cmp.Diff(wantPruned, changes(pruned)); diff != "" {
		t.Errorf("prune changes (-want +got):\n%s", diff)
	}
	if _, err := cl.GetCluster(context.Background(), &falconv1.GetClusterRequest{Name: "local"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetCluster(local) after prune = %v, want NotFound", err)
	}
	if n := len(pruned.GetItems()); n != 2 {
		t.Errorf("prune response lists %d clusters, want 2", n)
	}
}

func TestApplyPruneSparesClusterWithLiveJobs(t *testing.T) {
	env := apitest.Start(t, map[string]string{"busy": "kubernetes", "idle": "kubernetes"})
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	exp, err := env.Exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "pinned", ClusterName: "busy",
		RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "sleep 1000", Image: "busybox", Replica: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	keep := parse(t, "clusters:\n  keep:\n    provider: local\n")
	want := []change{{"busy", "offline", []string{"status"}}, {"idle", "deleted", nil}, {"keep", "created", nil}}

	dry := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: keep, Prune: true, DryRun: true})
	if diff := cmp.Diff(want, changes(dry)); diff != "" {
		t.Errorf("dry-run prune changes (-want +got):\n%s", diff)
	}
	if n := len(listClusters(t, cl)); n != 2 {
		t.Errorf("dry run left %d clusters, want the 2 it started with", n)
	}

	resp := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: keep, Prune: true})
	if diff := cmp.Diff(want, changes(resp)); diff != "" {
		t.Errorf("prune changes (-want +got):\n%s", diff)
	}
	var names []string
	for _, c := range listClusters(t, cl) {
		names = append(names, c.GetName()+"/"+c.GetStatus())
	}
	if diff := cmp.Diff([]string{"busy/offline", "keep/active"}, names); diff != "" {
		t.Errorf("registry after prune (-want +got):\n%s", diff)
	}
	if got := env.Exp(t, exp.GetId()); got.GetClusterName() != "busy" {
		t.Errorf("the pinned experiment lost its cluster: %v", got)
	}
}

func TestApplyInvalidWritesNothing(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	before := listClusters(t, cl)
	tests := []struct {
		name      string
		clusters  []*falconv1.Cluster
		selection string
		want      []string // parts of the message
	}{
		{"none", nil, "", []string{"clusters: is required"}},
		{
			name:      "unknown selection policy refuses the good clusters too",
			clusters:  []*falconv1.Cluster{{Name: "ok", Backend: "local"}},
			selection: "fastest",
			want:      []string{`selection: "fastest": allowed values are spread (the default) and priority`},
		},
		{
			name: "one bad cluster refuses all",
			clusters: []*falconv1.Cluster{
				{Name: "ok", Backend: "local"},
				{Name: "bad", Backend: "gke", Project: "p", Location: "l"},
				{Name: "Bad_Name", Backend: "kubernetes", KubeContext: "c", Accelerators: []*falconv1.AcceleratorSlot{{Type: "v9z", Priority: 1}}},
			},
			want: []string{
				"clusters[1].gke_cluster: is required for backend gke",
				`clusters[2].name: "Bad_Name" must be a DNS-1123 label`,
				`clusters[2].accelerators[0].type: unknown device type "v9z"`,
			},
		},
		{
			name:     "duplicate names",
			clusters: []*falconv1.Cluster{{Name: "a", Backend: "local"}, {Name: "a", Backend: "local"}},
			want:     []string{`clusters[1].name: "a" is listed twice (also clusters[0])`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, dry := range []bool{false, true} {
				_, err := cl.ApplyClusters(context.Background(), &falconv1.ApplyClustersRequest{Clusters: tt.clusters, Selection: tt.selection, Prune: true, DryRun: dry})
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("ApplyClusters = %v, want InvalidArgument", err)
				}
				for _, w := range tt.want {
					if !strings.Contains(status.Convert(err).Message(), w) {
						t.Errorf("message %q does not contain %q", status.Convert(err).Message(), w)
					}
				}
			}
			if diff := cmp.Diff(before, listClusters(t, cl), protocmp.Transform()); diff != "" {
				t.Errorf("a refused apply wrote (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRegisterCluster(t *testing.T) {
	env := apitest.Start(t, nil)
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	ctx := context.Background()
	in := &falconv1.Cluster{
		Name: "lab", Backend: "kubernetes", KubeContext: "lab", Namespace: "falcon", GcsBucket: "gs://lab-bkt",
		ServiceAccount: "falcon-jobs",
		Accelerators:   []*falconv1.AcceleratorSlot{{Type: "l4", Priority: 3}, {Type: "h100", Priority: 1}},
	}
	got, err := cl.RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: in})
	if err != nil {
		t.Fatal(err)
	}
	want := &falconv1.Cluster{
		Name: "lab", Backend: "kubernetes", KubeContext: "lab", Namespace: "falcon", GcsBucket: "lab-bkt", Status: "active",
		ServiceAccount:   "falcon-jobs",
		Accelerators:     []*falconv1.AcceleratorSlot{{Type: "nvidia-h100-80gb", Priority: 1}, {Type: "nvidia-l4", Priority: 3}},
		AcceleratorTypes: []string{"nvidia-h100-80gb", "nvidia-l4"},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&falconv1.Cluster{}, "id", "created_at")); diff != "" {
		t.Errorf("RegisterCluster (-want +got):\n%s", diff)
	}
	if !ids.Valid(ids.Cluster, got.GetId()) {
		t.Errorf("id %q is not a cluster ID", got.GetId())
	}
	read, err := cl.GetCluster(ctx, &falconv1.GetClusterRequest{Name: "lab"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, read, protocmp.Transform()); diff != "" {
		t.Errorf("GetCluster after register (-registered +read):\n%s", diff)
	}

	// Registering the name again updates in place.
	in.MaxQueueDepth = 3
	again, err := cl.RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: in})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetId() != got.GetId() || again.GetMaxQueueDepth() != 3 {
		t.Errorf("re-register = %v; want the same ID with max_queue_depth 3", again)
	}

	for _, tc := range []struct {
		in   *falconv1.Cluster
		want string
	}{
		{nil, "cluster: is required"},
		{&falconv1.Cluster{Name: "k", Backend: "kubernetes"}, "cluster.kube_context: is required for backend kubernetes"},
		{&falconv1.Cluster{Name: "k", Backend: "aws"}, `cluster.backend: "aws" is not a backend; one of local, kubernetes, gke, xpk`},
		{&falconv1.Cluster{Name: "k", Backend: "xpk"}, "cluster.project: is required for backend xpk; cluster.location: is required for backend xpk; cluster.gke_cluster: is required for backend xpk"},
		{&falconv1.Cluster{Name: "k", Backend: "xpk", Project: "p", Location: "us-east5-a", GkeCluster: "c", XpkPath: "/nonexistent/bin/xpk"},
			`cluster.xpk_path: "/nonexistent/bin/xpk" cannot be run on this machine`},
		{&falconv1.Cluster{Name: "k", Backend: "xpk", Project: "p", Location: "us-east5-a", GkeCluster: "c", ExtraArgs: []string{"--spot", "--zone=us-west1-a"}},
			`cluster.extra_args[1]: "--zone=us-west1-a" sets --zone, which Falcon sets itself`},
		{&falconv1.Cluster{Name: "k", Backend: "local", Status: "down"}, `cluster.status: "down" is not a cluster status; allowed: active, maintenance, offline`},
		{&falconv1.Cluster{Name: "k", Backend: "local", MaxQueueDepth: -1}, "cluster.max_queue_depth: must be 0 (no limit) or positive"},
		{&falconv1.Cluster{Name: "k", Backend: "local", ServiceAccount: "Jobs"}, `cluster.service_account: "Jobs" must be a DNS-1123 subdomain`},
	} {
		_, err := cl.RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: tc.in})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RegisterCluster(%v) = %v, want InvalidArgument containing %q", tc.in, err, tc.want)
		}
	}
	if n := len(listClusters(t, cl)); n != 1 {
		t.Errorf("%d clusters registered, want 1", n)
	}
}

func TestSetClusterStatus(t *testing.T) {
	env := apitest.Start(t, map[string]string{"edge": "local"})
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	ctx := context.Background()
	for _, st := range []string{"maintenance", "maintenance", "offline", "active"} {
		got, err := cl.SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: "edge", Status: st})
		if err != nil {
			t.Fatalf("SetClusterStatus(%s): %v", st, err)
		}
		read, err := cl.GetCluster(ctx, &falconv1.GetClusterRequest{Name: "edge"})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetStatus() != st || read.GetStatus() != st {
			t.Errorf("SetClusterStatus(%s) returned %s, stored %s", st, got.GetStatus(), read.GetStatus())
		}
	}
	if _, err := cl.SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: "mars", Status: "offline"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown cluster: %v, want NotFound", err)
	}
	_, err := cl.SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: "edge", Status: "Drained"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `status: "Drained" is not a cluster status; allowed: active, maintenance, offline`) {
		t.Errorf("bad status: %v", err)
	}
}

// The new routes of gateway.yaml reach the handlers over HTTP.
func TestClusterRoutesOverHTTP(t *testing.T) {
	env := apitest.Start(t, map[string]string{"edge": "local"})
	post := func(path, body string) int {
		t.Helper()
		resp, err := http.Post("http://"+env.HTTPAddr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/v1/clusters/edge:setStatus", `{"status": "maintenance"}`); code != http.StatusOK {
		t.Errorf("setStatus: HTTP %d", code)
	}
	if code := post("/v1/clusters:apply", `{"clusters": [{"name": "edge", "backend": "local"}], "dry_run": true}`); code != http.StatusOK {
		t.Errorf("apply: HTTP %d", code)
	}
	if code := post("/v1/clusters", `{"name": "other", "backend": "local"}`); code != http.StatusOK {
		t.Errorf("register: HTTP %d", code)
	}
	if code := post("/v1/clusters:apply", `{"clusters": []}`); code != http.StatusBadRequest {
		t.Errorf("empty apply: HTTP %d, want 400", code)
	}
}

// A local cluster is registered by the process that runs its jobs (falcon
// dev); applying a registry file must not take it offline.
func TestApplyLeavesLocalClustersAlone(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	resp, err := cl.ApplyClusters(context.Background(), &falconv1.ApplyClustersRequest{Prune: true, Clusters: []*falconv1.Cluster{
		{Name: "edge", Backend: "kubernetes", KubeContext: "edge"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.GetChanges() {
		if c.GetName() == "local" && c.GetAction() != "unchanged" {
			t.Fatalf("local cluster %s by apply", c.GetAction())
		}
	}
	got, err := cl.GetCluster(context.Background(), &falconv1.GetClusterRequest{Name: "local"})
	if err != nil || got.GetStatus() != "active" {
		t.Fatalf("local cluster after apply: %v %v", got, err)
	}
}

// The registry's selection policy: spread until an apply says priority,
// served by ListClusters; a dry run reports the change and writes nothing;
// a file that no longer names it is spread again.
func TestApplySelection(t *testing.T) {
	env := apitest.Start(t, nil)
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	ctx := context.Background()
	listed := func() string {
		t.Helper()
		resp, err := cl.ListClusters(ctx, &falconv1.ListClustersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetSelection()
	}
	if got := listed(); got != "spread" {
		t.Fatalf("a new registry's selection = %q, want spread", got)
	}
	steps := []struct {
		name               string
		selection          string
		dry                bool
		wantResp, wantPrev string
		wantListed         string
	}{
		{"dry run", "priority", true, "priority", "spread", "spread"},
		{"priority", "priority", false, "priority", "spread", "priority"},
		{"again: unchanged", "priority", false, "priority", "", "priority"},
		{"not named: spread", "", false, "spread", "priority", "spread"},
	}
	for _, st := range steps {
		resp := apply(t, cl, &falconv1.ApplyClustersRequest{Clusters: parse(t, registry), Selection: st.selection, DryRun: st.dry})
		if resp.GetSelection() != st.wantResp || resp.GetPreviousSelection() != st.wantPrev {
			t.Errorf("%s: response selection %q (previous %q), want %q (previous %q)", st.name, resp.GetSelection(), resp.GetPreviousSelection(), st.wantResp, st.wantPrev)
		}
		if got := listed(); got != st.wantListed {
			t.Errorf("%s: listed selection %q, want %q", st.name, got, st.wantListed)
		}
	}
}
