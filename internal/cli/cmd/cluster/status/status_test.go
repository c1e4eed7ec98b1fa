package status

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestNewCmdStatusArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "name", args: []string{"tpu-east"}, want: "tpu-east"},
		{name: "no name shows every cluster", args: nil, want: ""},
		{name: "two names", args: []string{"a", "b"}, wantErr: "accepts one cluster NAME, received 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.Table)
			var got *Options
			err := clitest.Execute(NewCmdStatus(f, func(_ context.Context, o *Options) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if got != nil {
					t.Error("the command ran despite the usage error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want {
				t.Errorf("Name = %q, want %q", got.Name, tt.want)
			}
		})
	}
}

// ago is a timestamp d before the CLI tests' fixed clock.
func ago(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(clitest.Now.Add(-d)) }

// Against a real API server: a controller reports, the command reads.
func TestStatusRealServer(t *testing.T) {
	env := apitest.Start(t, map[string]string{"tpu-east": "gke", "broken": "gke", "no-res": "gke", "fresh": "local"})
	ctl := falconv1.NewClusterServiceClient(env.Conn)
	for _, st := range []*falconv1.ClusterStatus{
		{
			ClusterName: "tpu-east", ReportedAt: ago(3 * time.Minute),
			Reservation: &falconv1.ReservationCapacity{Name: "res-v7x", Count: 16, InUse: 12, Free: 4},
			NodePools: []*falconv1.NodePoolStatus{
				{Name: "falcon-job-aaaa", AcceleratorType: "tpu7x", Topology: "2x2x2", Nodes: 2, Status: "RUNNING",
					SupplyMode: "reservation", OwnerJobId: "job-aaaaaaaaaa", CreatedAt: ago(65 * time.Minute)},
				{Name: "falcon-job-bbbb", AcceleratorType: "tpu7x", Topology: "2x2x4", Nodes: 4, Status: "RUNNING",
					SupplyMode: "flex-start", CreatedAt: ago(3 * time.Hour), IdleSince: ago(125 * time.Minute)},
				{Name: "falcon-job-cccc", AcceleratorType: "tpu7x", Topology: "2x2x2", Nodes: 2, Status: "RUNNING",
					SupplyMode: "reservation", CreatedAt: ago(10 * time.Minute), IdleSince: ago(3 * time.Minute)},
			},
			Queues: []*falconv1.QueueStatus{
				{Topology: "2x2x2", AcceleratorTypes: []string{"tpu7x"}, Waiting: 3, AcquiringJobId: "job-dddddddddd", Running: 1},
				{Topology: "4x4", AcceleratorTypes: []string{"tpu7x", "tpu-v6e-slice"}, Running: 2},
			},
		},
		{ClusterName: "broken", ReportedAt: ago(90 * time.Second), Error: "cannot reach the cluster: connection refused"},
		{
			ClusterName: "no-res", ReportedAt: ago(30 * time.Second),
			Reservation: &falconv1.ReservationCapacity{Name: "res-gone", Error: "reservation res-gone not found"},
			Queues:      []*falconv1.QueueStatus{{Topology: "2x2", AcceleratorTypes: []string{"tpu7x"}, Waiting: 1}},
		},
	} {
		if _, err := ctl.ReportClusterStatus(context.Background(), &falconv1.ReportClusterStatusRequest{Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	two, one := int32(2), int32(1)
	if _, err := ctl.ReportClusterProbes(context.Background(), &falconv1.ReportClusterProbesRequest{Items: []*falconv1.ClusterProbe{
		{Cluster: "tpu-east", Reachable: true, QueueDepth: &two, RunningCount: &one, ProbedAt: ago(20 * time.Second)},
		{Cluster: "broken", Error: "probe timed out after 15s", ProbedAt: ago(time.Minute)},
	}}); err != nil {
		t.Fatal(err)
	}
	url := "http://" + env.HTTPAddr

	tests := []struct {
		name    string
		cluster string
		want    string
	}{
		{
			name:    "pools and queues",
			cluster: "tpu-east",
			want: `Cluster tpu-east: reported 3m ago
Probe: reachable, 2 queued, 1 running, 20s ago
Reservation res-v7x: 4/16 nodes free

NODE POOLS
NAME             ACCELERATOR  TOPOLOGY  NODES  STATUS   MODE         OWNER           IDLE  AGE
falcon-job-aaaa  tpu7x        2x2x2     2      RUNNING  reservation  job-aaaaaaaaaa  -     65m
falcon-job-bbbb  tpu7x        2x2x4     4      RUNNING  flex-start   idle            2h5m  3h
falcon-job-cccc  tpu7x        2x2x2     2      RUNNING  reservation  idle            3m    10m

QUEUES
TOPOLOGY  ACCELERATORS         WAITING  ACQUIRING       RUNNING
2x2x2     tpu7x                3        job-dddddddddd  1
4x4       tpu7x,tpu-v6e-slice  0        -               2
`,
		},
		{
			name:    "error and empty sections",
			cluster: "broken",
			want: `Cluster broken: reported 90s ago; error: cannot reach the cluster: connection refused
Probe: unreachable, 60s ago: probe timed out after 15s
No default reservation

No node pools

No queues
`,
		},
		{
			name:    "reservation unreadable, queue without pools",
			cluster: "no-res",
			want: `Cluster no-res: reported 30s ago
Probe: none yet
Reservation res-gone: capacity unknown: reservation res-gone not found

No node pools

QUEUES
TOPOLOGY  ACCELERATORS  WAITING  ACQUIRING  RUNNING
2x2       tpu7x         1        -          0
`,
		},
		{
			name:    "never reported",
			cluster: "fresh",
			want:    "Cluster fresh: no report from a controller yet\nProbe: none (local clusters are not probed: their jobs are the controller's own processes)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, s := clitest.NewFactory(t, url, output.Table)
			if err := clitest.Execute(NewCmdStatus(f, nil), tt.cluster); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, s.Out.String()); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}

	// A local cluster is not probed: --probe on it is refused by name,
	// before anything is asked of the server.
	t.Run("probe a local cluster", func(t *testing.T) {
		f, _ := clitest.NewFactory(t, url, output.Table)
		err := clitest.Execute(NewCmdStatus(f, nil), "fresh", "--probe")
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "--probe: cluster fresh runs its jobs as the controller's own processes (backend local)") {
			t.Errorf("error = %v, want --probe refused for a local cluster", err)
		}
	})

	// JSON and YAML are the ClusterStatus message as the API returns it.
	type pool struct {
		Name       string `json:"name"`
		OwnerJobID string `json:"owner_job_id"`
	}
	type reservation struct {
		Free string `json:"free"` // protojson writes int64 as a string
	}
	type queue struct {
		Waiting int `json:"waiting"` // present even when 0
	}
	type statusDoc struct {
		ClusterName string      `json:"cluster_name"`
		ReportedAt  string      `json:"reported_at"`
		Reservation reservation `json:"reservation"`
		NodePools   []pool      `json:"node_pools"`
		Queues      []queue     `json:"queues"`
	}
	want := statusDoc{
		ClusterName: "tpu-east", ReportedAt: "2026-11-29T11:57:00Z", Reservation: reservation{Free: "4"},
		NodePools: []pool{{"falcon-job-aaaa", "job-aaaaaaaaaa"}, {"falcon-job-bbbb", ""}, {"falcon-job-cccc", ""}},
		Queues:    []queue{{3}, {0}},
	}
	for _, format := range []output.Format{output.JSON, output.YAML} {
		t.Run(string(format), func(t *testing.T) {
			f, s := clitest.NewFactory(t, url, format)
			if err := clitest.Execute(NewCmdStatus(f, nil), "tpu-east"); err != nil {
				t.Fatal(err)
			}
			raw := s.Out.Bytes()
			if format == output.YAML {
				var err error
				if raw, err = yaml.YAMLToJSON(raw); err != nil {
					t.Fatalf("%v in\n%s", err, s.Out)
				}
			}
			var got statusDoc
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("%v in\n%s", err, s.Out)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", format, diff)
			}
		})
	}

	// Without a name: every cluster, in the registry's order, each as above.
	t.Run("every cluster", func(t *testing.T) {
		f, s := clitest.NewFactory(t, url, output.Table)
		if err := clitest.Execute(NewCmdStatus(f, nil)); err != nil {
			t.Fatal(err)
		}
		out := s.Out.String()
		for _, name := range []string{"tpu-east", "broken", "no-res", "fresh"} {
			if !strings.Contains(out, "Cluster "+name+":") {
				t.Errorf("no section for %s in\n%s", name, out)
			}
		}
		if !strings.Contains(out, "falcon-job-bbbb  tpu7x        2x2x4     4      RUNNING  flex-start   idle            2h5m  3h") {
			t.Errorf("tpu-east's pools missing in\n%s", out)
		}
		f, s = clitest.NewFactory(t, url, output.JSON)
		if err := clitest.Execute(NewCmdStatus(f, nil)); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Items []statusDoc `json:"items"`
		}
		if err := json.Unmarshal(s.Out.Bytes(), &doc); err != nil {
			t.Fatalf("%v in\n%s", err, s.Out)
		}
		if len(doc.Items) != 4 {
			t.Errorf("%d clusters in JSON, want 4:\n%s", len(doc.Items), s.Out)
		}
	})

	f, _ := clitest.NewFactory(t, url, output.Table)
	err := clitest.Execute(NewCmdStatus(f, nil), "mars")
	if code := errdefs.ExitCode(errdefs.Code(err)); code != errdefs.ExitNotFound {
		t.Errorf("unknown cluster: %v, exit code %d; want %d (not found)", err, code, errdefs.ExitNotFound)
	}
}

func TestIdleFor(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{45 * time.Second, "45s"},
		{3*time.Minute + 59*time.Second, "3m"},
		{2 * time.Hour, "2h"},
		{2*time.Hour + 5*time.Minute + 30*time.Second, "2h5m"},
		{26 * time.Hour, "1d2h"},
		{72*time.Hour + 10*time.Minute, "3d"},
	}
	for _, tt := range tests {
		if got := idleFor(tt.d); got != tt.want {
			t.Errorf("idleFor(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
