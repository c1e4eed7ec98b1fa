package clusterconfig_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
)

const xpkRegistry = `
clusters:
  tpu-xpk:
    provider: xpk
    project: primatrix-tpu
    zone: us-east5-a
    cluster_id: tpu-xpk-cluster
    xpk_path: /opt/xpk/bin/xpk
    extra_args: [--spot, --max-restarts=2]
    accelerator_types:
      - {type: v5p, device_class: tpu, priority: 2}
    default_namespace: default
    probe_timeout_s: 20
  gpu-xpk:
    provider: xpk
    project: primatrix-gpu
    zone: us-central1-a
    cluster_id: gpu-cluster
    accelerator_types:
      - {type: h100, device_class: gpu, priority: 1}
      - {type: v5p, device_class: tpu, priority: 1}
`

// Design 001, acceptance table 1 (ClusterRegistry), for xpk clusters.
func TestRegistryXpk(t *testing.T) {
	t.Run("加载合法配置 load", func(t *testing.T) {
		got, err := clusterconfig.Parse([]byte(xpkRegistry))
		if err != nil {
			t.Fatal(err)
		}
		want := &falconv1.Cluster{
			Name: "tpu-xpk", Backend: "xpk", Project: "primatrix-tpu", Location: "us-east5-a", GkeCluster: "tpu-xpk-cluster",
			XpkPath: "/opt/xpk/bin/xpk", ExtraArgs: []string{"--spot", "--max-restarts=2"},
			Accelerators:     []*falconv1.AcceleratorSlot{{Type: "v5p", Priority: 2, DeviceClass: "tpu"}},
			AcceleratorTypes: []string{"v5p"}, Namespace: "default", ProbeTimeoutS: 20, Status: "active",
		}
		if diff := cmp.Diff(want, got[1], protocmp.Transform()); diff != "" {
			t.Errorf("tpu-xpk (-want +got):\n%s", diff)
		}
	})

	t.Run("配置校验 missing project, zone and cluster_id each named", func(t *testing.T) {
		_, err := clusterconfig.Parse([]byte("clusters:\n  x:\n    provider: xpk\n"))
		fe := fieldErrors(t, err)
		want := []string{"clusters.x.project", "clusters.x.zone", "clusters.x.cluster_id"}
		if diff := cmp.Diff(want, fields(fe)); diff != "" {
			t.Errorf("fields (-want +got):\n%s", diff)
		}
		if !strings.Contains(fe[0].Detail, "is required for provider xpk") {
			t.Errorf("detail %q", fe[0].Detail)
		}
	})

	t.Run("按 accelerator 查询 find by accelerator, by priority", func(t *testing.T) {
		got, err := clusterconfig.Parse([]byte(xpkRegistry))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range clusterconfig.FindByAccelerator(got, "tpu-v5p") {
			names = append(names, c.Cluster.GetName())
		}
		if diff := cmp.Diff([]string{"gpu-xpk", "tpu-xpk"}, names); diff != "" {
			t.Errorf("candidates (-want +got):\n%s", diff)
		}
		if c := clusterconfig.FindByAccelerator(got, "v6e"); len(c) != 0 {
			t.Errorf("无匹配 no match: %v, want none", c)
		}
	})

	t.Run("重复加载 reload gives the same clusters, not duplicates", func(t *testing.T) {
		a, _ := clusterconfig.Parse([]byte(xpkRegistry))
		b, _ := clusterconfig.Parse([]byte(xpkRegistry))
		if len(b) != 2 || cmp.Diff(a, b, protocmp.Transform()) != "" {
			t.Errorf("second load differs or duplicates: %d clusters", len(b))
		}
	})
}

func TestRegistryXpkBadInput(t *testing.T) {
	base := "clusters:\n  x:\n    provider: xpk\n    project: p\n    zone: z\n    cluster_id: c\n"
	tests := []struct {
		name, extra, field, detail string
	}{
		{"device_class other than tpu or gpu", "    accelerator_types: [{type: v5p, device_class: cpu}]\n",
			"clusters.x.accelerator_types[0].device_class", `"cpu" is not a device class; one of tpu, gpu`},
		{"extra args overriding a Falcon flag", "    extra_args: [--spot, --tpu-type=v5p-8]\n",
			"clusters.x.extra_args[1]", `"--tpu-type=v5p-8" sets --tpu-type, which Falcon sets itself`},
		{"extra args abbreviating a Falcon flag", "    extra_args: [--work, w]\n",
			"clusters.x.extra_args[0]", `"--work" abbreviates --workload`},
		{"env-file, exclusive with the --env Falcon sets", "    extra_args: [--env-file=.env]\n",
			"clusters.x.extra_args[0]", "sets --env-file"},
		{"xpk_path on another provider", "    xpk_path: /bin/xpk\n", "", ""},
		{"a relative xpk_path", "    xpk_path: bin/xpk\n", "clusters.x.xpk_path", "must be an absolute path"},
		{"a cpu type on an xpk cluster", "    accelerator_types: [{type: cpu}]\n", "clusters.x.accelerator_types[0].type", "not an accelerator"},
		{"a probe timeout past the limit", "    probe_timeout_s: 301\n", "clusters.x.probe_timeout_s", "at most 300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := base + tt.extra
			if tt.field == "" {
				file = "clusters:\n  x:\n    provider: kubernetes\n    context: c\n" + tt.extra
				tt.field, tt.detail = "clusters.x.xpk_path", "is only for provider xpk, not kubernetes"
			}
			_, err := clusterconfig.Parse([]byte(file))
			fe := fieldErrors(t, err)
			if len(fe) != 1 || fe[0].Field != tt.field || !strings.Contains(fe[0].Detail, tt.detail) {
				t.Errorf("errors %v; want one on %s containing %q", err, tt.field, tt.detail)
			}
		})
	}
}

// An xpk_path that does not exist is refused when the cluster is applied.
func TestCheckXpkPath(t *testing.T) {
	c := &falconv1.Cluster{Name: "x", Backend: "xpk", XpkPath: filepath.Join(t.TempDir(), "xpk")}
	errs := clusterconfig.CheckXpkPath(c, exec.LookPath)
	if len(errs) != 1 || errs[0].Field != "xpk_path" || !strings.Contains(errs[0].Detail, "cannot be run on this machine") {
		t.Errorf("CheckXpkPath = %v", errs)
	}
	if errs := clusterconfig.CheckXpkPath(&falconv1.Cluster{Backend: "xpk", XpkPath: "/bin/sh"}, exec.LookPath); errs != nil {
		t.Errorf("an existing path refused: %v", errs)
	}
	if errs := clusterconfig.CheckXpkPath(&falconv1.Cluster{Backend: "xpk"}, func(string) (string, error) { return "", errors.New("x") }); errs != nil {
		t.Errorf("the default (xpk on PATH) is the probe's to report, not apply's: %v", errs)
	}
}
