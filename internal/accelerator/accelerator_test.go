package accelerator

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/errdefs"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"v7x", "v7x"},
		{"tpu7x", "v7x"},
		{"tpu-v7x", "v7x"},
		{"TPU-V7X", "v7x"},
		{" v7x\n", "v7x"},
		{"ironwood", "v7x"},
		{"v5p", "v5p"},
		{"tpu-v5p", "v5p"},
		{"tpu-v5p-slice", "v5p"},
		{"v6e", "v6e"},
		{"tpu-v6e", "v6e"},
		{"tpu-v6e-slice", "v6e"},
		{"v5e", "v5e"},
		{"v5litepod", "v5e"},
		{"tpu-v5-lite-podslice", "v5e"},
		{"nvidia-l4", "nvidia-l4"},
		{"L4", "nvidia-l4"},
		{"nvidia-tesla-a100", "nvidia-tesla-a100"},
		{"a100", "nvidia-tesla-a100"},
		{"nvidia-a100-80gb", "nvidia-a100-80gb"},
		{"nvidia-h100-80gb", "nvidia-h100-80gb"},
		{"h100", "nvidia-h100-80gb"},
		{"nvidia-h100-mega-80gb", "nvidia-h100-mega-80gb"},
		{"nvidia-h200-141gb", "nvidia-h200-141gb"},
		{"nvidia-b200", "nvidia-b200"},
		{"cpu", "cpu"},
		{"CPU", "cpu"},
		{"", "cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := Lookup(tt.in)
			if err != nil {
				t.Fatalf("Lookup(%q): %v", tt.in, err)
			}
			if s.Name != tt.want {
				t.Errorf("Lookup(%q).Name = %q, want %q", tt.in, s.Name, tt.want)
			}
		})
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, in := range []string{"v8x", "tpu", "h100-40gb", "gpu"} {
		t.Run(in, func(t *testing.T) {
			_, err := Lookup(in)
			var fe *errdefs.FieldError
			if !errors.As(err, &fe) || fe.Field != "device_type" {
				t.Fatalf("Lookup(%q) = %v, want a FieldError on device_type", in, err)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			for _, want := range []string{in, "v5e, v5p, v6e, v7x", "nvidia-b200", "cpu"} {
				if !strings.Contains(fe.Detail, want) {
					t.Errorf("detail %q does not mention %q", fe.Detail, want)
				}
			}
		})
	}
}

func tpuToleration() *Toleration {
	return &Toleration{Key: "google.com/tpu", Operator: "Exists", Effect: "NoSchedule"}
}

func gpuToleration() *Toleration {
	return &Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}
}

func tpuSelector(label, topo string) map[string]string {
	return map[string]string{"cloud.google.com/gke-tpu-accelerator": label, "cloud.google.com/gke-tpu-topology": topo}
}

func TestSlice(t *testing.T) {
	type args struct {
		deviceType, topo     string
		replica, deviceCount int
	}
	tests := []struct {
		name string
		args args
		want Slice // Spec is filled in by the test
	}{
		{"v7x 2x2x4 is four hosts of 8 devices (USERS.md)", args{"v7x", "2x2x4", 4, 8}, Slice{
			Topology: "2x2x4", Chips: 16, Hosts: 4, ChipsPerHost: 4, DevicesPerHost: 8,
			MachineType: "tpu7x-standard-4t", NodeSelector: tpuSelector("tpu7x", "2x2x4"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v7x 2x2x1 is one host (USERS.md)", args{"tpu7x", "2x2x1", 1, 8}, Slice{
			Topology: "2x2x1", Chips: 4, Hosts: 1, ChipsPerHost: 4, DevicesPerHost: 8,
			MachineType: "tpu7x-standard-4t", NodeSelector: tpuSelector("tpu7x", "2x2x1"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v7x device_count 0 means the whole host", args{"v7x", "2x2x2", 2, 0}, Slice{
			Topology: "2x2x2", Chips: 8, Hosts: 2, ChipsPerHost: 4, DevicesPerHost: 8,
			MachineType: "tpu7x-standard-4t", NodeSelector: tpuSelector("tpu7x", "2x2x2"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"topology is lower-cased", args{"v7x", "2X2X1", 1, 0}, Slice{
			Topology: "2x2x1", Chips: 4, Hosts: 1, ChipsPerHost: 4, DevicesPerHost: 8,
			MachineType: "tpu7x-standard-4t", NodeSelector: tpuSelector("tpu7x", "2x2x1"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v5p 2x2x1 one host", args{"tpu-v5p", "2x2x1", 1, 4}, Slice{
			Topology: "2x2x1", Chips: 4, Hosts: 1, ChipsPerHost: 4, DevicesPerHost: 4,
			MachineType: "ct5p-hightpu-4t", NodeSelector: tpuSelector("tpu-v5p-slice", "2x2x1"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v5p 2x2x2 two hosts", args{"v5p", "2x2x2", 2, 0}, Slice{
			Topology: "2x2x2", Chips: 8, Hosts: 2, ChipsPerHost: 4, DevicesPerHost: 4,
			MachineType: "ct5p-hightpu-4t", NodeSelector: tpuSelector("tpu-v5p-slice", "2x2x2"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v6e 2x2 one host of 4", args{"v6e", "2x2", 1, 4}, Slice{
			Topology: "2x2", Chips: 4, Hosts: 1, ChipsPerHost: 4, DevicesPerHost: 4,
			MachineType: "ct6e-standard-4t", NodeSelector: tpuSelector("tpu-v6e-slice", "2x2"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v6e 1x1 is the 1-chip machine", args{"v6e", "1x1", 1, 1}, Slice{
			Topology: "1x1", Chips: 1, Hosts: 1, ChipsPerHost: 1, DevicesPerHost: 1,
			MachineType: "ct6e-standard-1t", NodeSelector: tpuSelector("tpu-v6e-slice", "1x1"),
			ResourceName: "google.com/tpu", ResourcePerHost: 1, Toleration: tpuToleration(),
		}},
		{"v6e 2x4 on one host is the 8-chip machine", args{"v6e", "2x4", 1, 8}, Slice{
			Topology: "2x4", Chips: 8, Hosts: 1, ChipsPerHost: 8, DevicesPerHost: 8,
			MachineType: "ct6e-standard-8t", NodeSelector: tpuSelector("tpu-v6e-slice", "2x4"),
			ResourceName: "google.com/tpu", ResourcePerHost: 8, Toleration: tpuToleration(),
		}},
		{"v6e 2x4 on two hosts is two 4-chip machines", args{"v6e", "2x4", 2, 4}, Slice{
			Topology: "2x4", Chips: 8, Hosts: 2, ChipsPerHost: 4, DevicesPerHost: 4,
			MachineType: "ct6e-standard-4t", NodeSelector: tpuSelector("tpu-v6e-slice", "2x4"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v6e 4x4 four hosts", args{"v6e", "4x4", 4, 0}, Slice{
			Topology: "4x4", Chips: 16, Hosts: 4, ChipsPerHost: 4, DevicesPerHost: 4,
			MachineType: "ct6e-standard-4t", NodeSelector: tpuSelector("tpu-v6e-slice", "4x4"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v5e 1x1", args{"v5litepod", "1x1", 1, 0}, Slice{
			Topology: "1x1", Chips: 1, Hosts: 1, ChipsPerHost: 1, DevicesPerHost: 1,
			MachineType: "ct5lp-hightpu-1t", NodeSelector: tpuSelector("tpu-v5-lite-podslice", "1x1"),
			ResourceName: "google.com/tpu", ResourcePerHost: 1, Toleration: tpuToleration(),
		}},
		{"v5e 2x2", args{"v5e", "2x2", 1, 0}, Slice{
			Topology: "2x2", Chips: 4, Hosts: 1, ChipsPerHost: 4, DevicesPerHost: 4,
			MachineType: "ct5lp-hightpu-4t", NodeSelector: tpuSelector("tpu-v5-lite-podslice", "2x2"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"v5e 2x4 one host", args{"v5e", "2x4", 1, 0}, Slice{
			Topology: "2x4", Chips: 8, Hosts: 1, ChipsPerHost: 8, DevicesPerHost: 8,
			MachineType: "ct5lp-hightpu-8t", NodeSelector: tpuSelector("tpu-v5-lite-podslice", "2x4"),
			ResourceName: "google.com/tpu", ResourcePerHost: 8, Toleration: tpuToleration(),
		}},
		{"v5e 4x8 eight hosts", args{"tpu-v5-lite-podslice", "4x8", 8, 4}, Slice{
			Topology: "4x8", Chips: 32, Hosts: 8, ChipsPerHost: 4, DevicesPerHost: 4,
			MachineType: "ct5lp-hightpu-4t", NodeSelector: tpuSelector("tpu-v5-lite-podslice", "4x8"),
			ResourceName: "google.com/tpu", ResourcePerHost: 4, Toleration: tpuToleration(),
		}},
		{"l4 default is a full host of 8", args{"nvidia-l4", "", 1, 0}, Slice{
			Chips: 8, Hosts: 1, ChipsPerHost: 8, DevicesPerHost: 8, MachineType: "g2-standard-96",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-l4"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 8, Toleration: gpuToleration(),
		}},
		{"l4 one GPU", args{"l4", "", 1, 1}, Slice{
			Chips: 1, Hosts: 1, ChipsPerHost: 1, DevicesPerHost: 1, MachineType: "g2-standard-4",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-l4"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 1, Toleration: gpuToleration(),
		}},
		{"a100 40gb four GPUs", args{"nvidia-tesla-a100", "", 1, 4}, Slice{
			Chips: 4, Hosts: 1, ChipsPerHost: 4, DevicesPerHost: 4, MachineType: "a2-highgpu-4g",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 4, Toleration: gpuToleration(),
		}},
		{"a100 80gb two GPUs", args{"nvidia-a100-80gb", "", 1, 2}, Slice{
			Chips: 2, Hosts: 1, ChipsPerHost: 2, DevicesPerHost: 2, MachineType: "a2-ultragpu-2g",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 2, Toleration: gpuToleration(),
		}},
		{"h100 two hosts of 8", args{"h100", "", 2, 8}, Slice{
			Chips: 16, Hosts: 2, ChipsPerHost: 8, DevicesPerHost: 8, MachineType: "a3-highgpu-8g",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 8, Toleration: gpuToleration(),
		}},
		{"h100 mega", args{"nvidia-h100-mega-80gb", "", 1, 0}, Slice{
			Chips: 8, Hosts: 1, ChipsPerHost: 8, DevicesPerHost: 8, MachineType: "a3-megagpu-8g",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 8, Toleration: gpuToleration(),
		}},
		{"h200", args{"h200", "", 1, 8}, Slice{
			Chips: 8, Hosts: 1, ChipsPerHost: 8, DevicesPerHost: 8, MachineType: "a3-ultragpu-8g",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 8, Toleration: gpuToleration(),
		}},
		{"b200", args{"nvidia-b200", "", 1, 0}, Slice{
			Chips: 8, Hosts: 1, ChipsPerHost: 8, DevicesPerHost: 8, MachineType: "a4-highgpu-8g",
			NodeSelector: map[string]string{"cloud.google.com/gke-accelerator": "nvidia-b200"},
			ResourceName: "nvidia.com/gpu", ResourcePerHost: 8, Toleration: gpuToleration(),
		}},
		{"cpu three hosts", args{"cpu", "", 3, 0}, Slice{Hosts: 3}},
		{"no device type is cpu", args{"", "", 1, 0}, Slice{Hosts: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.args.deviceType, tt.args.topo, tt.args.replica, tt.args.deviceCount)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			want := tt.want
			want.Spec, _ = Lookup(tt.args.deviceType)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Resolve(%+v) mismatch (-want +got):\n%s", tt.args, diff)
			}
			if got.MultiHost() != (want.Hosts > 1) {
				t.Errorf("MultiHost() = %v with %d hosts", got.MultiHost(), got.Hosts)
			}
		})
	}
}

func TestSliceErrors(t *testing.T) {
	type args struct {
		deviceType, topo     string
		replica, deviceCount int
	}
	tests := []struct {
		name string
		args args
		want map[string]string // field -> substring of its detail
	}{
		{"v7x replica short of the topology", args{"v7x", "2x2x4", 2, 8}, map[string]string{
			"replica": "topology 2x2x4 is 16 chips = 4 hosts of 4 chips; replica must be 4, got 2",
		}},
		{"one-host topology with two replicas", args{"v7x", "2x2x1", 2, 0}, map[string]string{
			"replica": "topology 2x2x1 is 4 chips = 1 host of 4 chips; replica must be 1, got 2",
		}},
		{"v7x 2x2x2 on one host", args{"v7x", "2x2x2", 1, 0}, map[string]string{
			"replica": "topology 2x2x2 is 8 chips = 2 hosts of 4 chips; replica must be 2, got 1",
		}},
		{"v5e 2x4 can be one or two hosts", args{"v5e", "2x4", 4, 0}, map[string]string{
			"replica": "topology 2x4 is 8 chips = 2 hosts of 4 chips (or 1 host of 8 chips); replica must be 2 (or 1), got 4",
		}},
		{"v7x device_count counted in chips", args{"v7x", "2x2x4", 4, 4}, map[string]string{
			"device_count": "v7x has 2 devices per chip: 4 chips per host = 8 devices; got 4 (device_count counts JAX devices per host, not chips)",
		}},
		{"device_count for the whole slice", args{"v7x", "2x2x4", 4, 32}, map[string]string{
			"device_count": "v7x has 2 devices per chip: 4 chips per host = 8 devices; got 32 (device_count is per host; that is the whole slice)",
		}},
		{"v6e device_count too large", args{"v6e", "2x2", 1, 8}, map[string]string{
			"device_count": "v6e has 1 device per chip: 4 chips per host = 4 devices; got 8",
		}},
		{"v6e 1x1 device_count", args{"v6e", "1x1", 1, 4}, map[string]string{
			"device_count": "v6e has 1 device per chip: 1 chip per host = 1 device; got 4",
		}},
		{"replica and device_count both wrong", args{"v7x", "2x2x4", 1, 4}, map[string]string{
			"replica":      "replica must be 4, got 1",
			"device_count": "= 8 devices; got 4",
		}},
		{"2D topology on a 3D type", args{"v7x", "2x2", 1, 0}, map[string]string{
			"device_topo": "v7x topologies are 3D (NxMxK, e.g. 2x2x1); got 2x2",
		}},
		{"3D topology on a 2D type", args{"v6e", "2x2x1", 1, 0}, map[string]string{
			"device_topo": "v6e topologies are 2D (NxM, e.g. 2x2); got 2x2x1",
		}},
		{"topology smaller than a v5p host", args{"v5p", "1x1x1", 1, 0}, map[string]string{
			"device_topo": "topology 1x1x1 is 1 chip; a v5p host has 4 chips, and larger slices are whole hosts of 4 chips",
		}},
		{"topology not whole hosts", args{"v6e", "2x3", 1, 0}, map[string]string{
			"device_topo": "topology 2x3 is 6 chips; a v6e host has 1, 4 or 8 chips",
		}},
		{"TPU without topology", args{"v7x", "", 1, 0}, map[string]string{
			"device_topo": "is required for v7x: the whole slice as NxMxK, e.g. 2x2x1",
		}},
		{"malformed topology", args{"v7x", "2x2xa", 1, 0}, map[string]string{
			"device_topo": `"2x2xa" must be NxMxK`,
		}},
		{"zero dimension", args{"v6e", "0x4", 1, 0}, map[string]string{
			"device_topo": `"0x4" must be NxM`,
		}},
		{"one dimension", args{"v6e", "4", 1, 0}, map[string]string{
			"device_topo": `"4" must be NxM`,
		}},
		{"absurd topology", args{"v7x", "100000x100000x100000", 1, 0}, map[string]string{
			"device_topo": "more than 1048576 chips",
		}},
		{"TPU replica missing: what the topology needs", args{"v7x", "2x2x1", 0, 0}, map[string]string{
			"replica": "is required: topology 2x2x1 is 4 chips = 1 host of 4 chips; set replica: 1",
		}},
		{"TPU replica missing, several hosts", args{"v7x", "2x2x4", 0, 0}, map[string]string{
			"replica": "is required: topology 2x2x4 is 16 chips = 4 hosts of 4 chips; set replica: 4",
		}},
		{"TPU replica missing, one or two hosts", args{"v5e", "2x4", 0, 0}, map[string]string{
			"replica": "set replica: 2 (or 1)",
		}},
		{"TPU replica negative", args{"v7x", "2x2x1", -1, 0}, map[string]string{
			"replica": "must be at least 1 (the number of hosts), got -1",
		}},
		{"GPU replica missing", args{"nvidia-h100-80gb", "", 0, 8}, map[string]string{
			"replica": "must be at least 1 (the number of hosts), got 0",
		}},
		{"negative device_count", args{"v7x", "2x2x1", 1, -8}, map[string]string{
			"device_count": "must be 0",
		}},
		{"GPU with a topology", args{"h100", "2x2", 1, 8}, map[string]string{
			"device_topo": "must be empty for nvidia-h100-80gb",
		}},
		{"GPU count no machine has", args{"h100", "", 1, 3}, map[string]string{
			"device_count": "nvidia-h100-80gb hosts have 1, 2, 4 or 8 GPUs; got 3",
		}},
		{"single-shape GPU", args{"b200", "", 1, 4}, map[string]string{
			"device_count": "nvidia-b200 hosts have 8 GPUs; got 4",
		}},
		{"CPU with a topology", args{"cpu", "2x2x2", 2, 0}, map[string]string{
			"device_topo": "cpu has no topology; set device_type to the accelerator the 2x2x2 slice is made of",
		}},
		{"no device type but a topology", args{"", "2x2x2", 2, 0}, map[string]string{
			"device_topo": "cpu has no topology",
		}},
		{"CPU with devices", args{"cpu", "", 1, 8}, map[string]string{
			"device_count": "must be 0 for cpu",
		}},
		{"unknown type", args{"tpu-v9", "2x2x1", 1, 0}, map[string]string{
			"device_type": `unknown device type "tpu-v9"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(tt.args.deviceType, tt.args.topo, tt.args.replica, tt.args.deviceCount)
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("Resolve(%+v) = %v, want an invalid-argument error", tt.args, err)
			}
			got := fieldDetails(t, err)
			if len(got) != len(tt.want) {
				t.Errorf("fields = %v, want exactly %v", keys(got), keys(tt.want))
			}
			for f, sub := range tt.want {
				if d, ok := got[f]; !ok {
					t.Errorf("no error on %s; got %v", f, err)
				} else if !strings.Contains(d, sub) {
					t.Errorf("%s: %q does not contain %q", f, d, sub)
				}
			}
		})
	}
}

// fieldDetails maps each field of err (a FieldError or FieldErrors) to its
// detail.
func fieldDetails(t *testing.T, err error) map[string]string {
	t.Helper()
	out := map[string]string{}
	var many errdefs.FieldErrors
	var one *errdefs.FieldError
	switch {
	case errors.As(err, &many):
		for _, e := range many {
			if _, dup := out[e.Field]; dup {
				t.Errorf("field %s reported twice: %v", e.Field, err)
			}
			out[e.Field] = e.Detail
		}
	case errors.As(err, &one):
		out[one.Field] = one.Detail
	default:
		t.Fatalf("%v (%T) is not a field error", err, err)
	}
	return out
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestTable checks the table against itself, so a new row cannot be
// half-filled.
func TestTable(t *testing.T) {
	for _, s := range Specs() {
		t.Run(s.Name, func(t *testing.T) {
			for _, n := range s.Names() {
				if n != strings.ToLower(n) {
					t.Errorf("name %q is not lower-case", n)
				}
			}
			for i := 1; i < len(s.MachineTypes); i++ {
				if s.MachineTypes[i-1].Chips >= s.MachineTypes[i].Chips {
					t.Errorf("machine types not in ascending chip order: %v", s.MachineTypes)
				}
			}
			switch s.Kind {
			case KindTPU:
				if s.NodeLabel == "" || s.DevicesPerChip < 1 || (s.TopologyDims != 2 && s.TopologyDims != 3) {
					t.Errorf("incomplete TPU row: %+v", s)
				}
				if _, ok := s.machine(s.ChipsPerHost); !ok {
					t.Errorf("no machine type with %d chips for multi-host slices", s.ChipsPerHost)
				}
				// The example topology every message offers must itself be valid.
				sl, err := s.Slice(s.HostTopology, 1, 0)
				if err != nil {
					t.Fatalf("HostTopology %s: %v", s.HostTopology, err)
				}
				if sl.ChipsPerHost != s.ChipsPerHost || sl.Hosts != 1 {
					t.Errorf("HostTopology %s is %d chips on %d hosts, want one host of %d", s.HostTopology, sl.ChipsPerHost, sl.Hosts, s.ChipsPerHost)
				}
			case KindGPU:
				if s.NodeLabel == "" {
					t.Errorf("GPU row without a node label")
				}
				if _, ok := s.machine(s.DefaultGPUs); !ok {
					t.Errorf("DefaultGPUs %d has no machine type", s.DefaultGPUs)
				}
			case KindCPU:
				if s.NodeLabel != "" || len(s.MachineTypes) > 0 {
					t.Errorf("cpu must not select nodes: %+v", s)
				}
			default:
				t.Errorf("unknown kind %q", s.Kind)
			}
		})
	}
}

func TestPlacementPolicy(t *testing.T) {
	tests := []struct {
		deviceType, topo string
		replica          int
		want             bool
	}{
		{"v7x", "2x2x4", 4, true},
		{"v7x", "2x2x1", 1, false}, // a single-host node pool needs no policy
		{"v5p", "2x2x2", 2, false},
		{"v6e", "4x4", 4, false},
	}
	for _, tt := range tests {
		sl, err := Resolve(tt.deviceType, tt.topo, tt.replica, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := sl.NeedsPlacementPolicy(); got != tt.want {
			t.Errorf("%s %s: NeedsPlacementPolicy() = %v, want %v", tt.deviceType, tt.topo, got, tt.want)
		}
	}
}

func TestPoolShape(t *testing.T) {
	tests := []struct {
		name                 string
		deviceType, topo     string
		replica, deviceCount int
		want                 string
	}{
		{"TPU multi-host is its topology", "v5p", "2x2x2", 2, 0, "2x2x2"},
		{"TPU topology is lower-cased", "v6e", "4X4", 4, 0, "4x4"},
		{"GPU default count", "h100", "", 1, 0, "1x8gpu"},
		{"GPU count and hosts", "nvidia-l4", "", 2, 4, "2x4gpu"},
		{"GPU one GPU per host", "a100", "", 3, 1, "3x1gpu"},
		{"CPU has none", "cpu", "", 2, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sl, err := Resolve(tt.deviceType, tt.topo, tt.replica, tt.deviceCount)
			if err != nil {
				t.Fatal(err)
			}
			if got := sl.PoolShape(); got != tt.want {
				t.Errorf("PoolShape() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSpecsAreCopies(t *testing.T) {
	specs := Specs()
	specs[0].Aliases[0] = "changed"
	specs[0].MachineTypes[0].Name = "changed"
	s, err := Lookup(specs[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	if s.Aliases[0] == "changed" || s.MachineTypes[0].Name == "changed" {
		t.Errorf("Specs() shares memory with the table: %+v", s)
	}
}

// TestDevicePeak checks that every accelerator has its peak figures, and
// that a TPU's are divided among the JAX devices of a chip.
func TestDevicePeak(t *testing.T) {
	for _, s := range Specs() {
		flops, bw := s.DevicePeak()
		if (s.Kind == KindCPU) != (flops == 0 || bw == 0) {
			t.Errorf("%s: DevicePeak() = %g FLOP/s, %g B/s", s.Name, flops, bw)
		}
	}
	tests := []struct {
		name      string
		wantFLOPS float64
		wantBW    float64
	}{
		{"v5p", 459e12, 2765e9},
		{"v7x", 2307e12 / 2, 7380e9 / 2},
		{"h100", 989e12, 3350e9},
		{"cpu", 0, 0},
	}
	for _, tt := range tests {
		s, err := Lookup(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if flops, bw := s.DevicePeak(); flops != tt.wantFLOPS || bw != tt.wantBW {
			t.Errorf("%s: DevicePeak() = %g, %g; want %g, %g", tt.name, flops, bw, tt.wantFLOPS, tt.wantBW)
		}
	}
}
