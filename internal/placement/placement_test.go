package placement

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// registry: local is the fallback; tpu-east offers v7x and is active;
// tpu-west offers v7x and cpu but is in maintenance; gpu-lab offers H100s
// (a slot, as the registry stores them now) and is in maintenance.
func registry() []*falconv1.Cluster {
	return []*falconv1.Cluster{
		{Name: "local", Backend: "local", Status: "active"},
		{Name: "tpu-east", Backend: "gke", Status: "active", AcceleratorTypes: []string{"v7x"}},
		{Name: "tpu-west", Backend: "gke", Status: "maintenance", AcceleratorTypes: []string{"tpu7x", "cpu"}},
		{Name: "gpu-lab", Backend: "kubernetes", Status: "maintenance",
			Accelerators: []*falconv1.AcceleratorSlot{{Type: "nvidia-h100-80gb", Priority: 1}}},
	}
}

func TestCandidates(t *testing.T) {
	tests := []struct {
		name, deviceType, pin string
		want                  []string
		wantErr               *PinError
	}{
		{name: "offered by an active cluster: only the active ones", deviceType: "v7x", want: []string{"tpu-east"}},
		{name: "an alias is the canonical type", deviceType: "TPU7X", want: []string{"tpu-east"}},
		{name: "offered only in maintenance: waits for those, never falls back", deviceType: "h100", want: []string{"gpu-lab"}},
		{name: "offered by nobody: the fallback", deviceType: "v6e", want: []string{"local"}},
		{name: "no device type is cpu, which tpu-west offers", deviceType: "", want: []string{"tpu-west"}},
		{name: "pinned to a cluster in maintenance that offers it", deviceType: "h100", pin: "gpu-lab", want: []string{"gpu-lab"}},
		{name: "pinned to the fallback, for a type nobody offers", deviceType: "v6e", pin: "local", want: []string{"local"}},
		{name: "pinned to the fallback, for a type another offers", deviceType: "v7x", pin: "local",
			wantErr: &PinError{Cluster: "local", Type: "v7x", Registered: true, Offers: []string{}, OfferedBy: []string{"tpu-east", "tpu-west"}}},
		{name: "pinned to a cluster that does not offer it", deviceType: "h100", pin: "tpu-west",
			wantErr: &PinError{Cluster: "tpu-west", Type: "nvidia-h100-80gb", Registered: true, Offers: []string{"v7x", "cpu"}, OfferedBy: []string{"gpu-lab"}}},
		{name: "pinned to an unknown cluster", deviceType: "v7x", pin: "mars", wantErr: &PinError{Cluster: "mars", Type: "v7x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Candidates(registry(), DeviceType(tt.deviceType), tt.pin)
			if tt.wantErr != nil {
				var pe *PinError
				if !errors.As(err, &pe) {
					t.Fatalf("Candidates = %v, %v; want a *PinError", got, err)
				}
				if diff := cmp.Diff(tt.wantErr, pe); diff != "" {
					t.Errorf("PinError (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.GetName())
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPinErrorSaysWhy(t *testing.T) {
	for _, tt := range []struct {
		err  *PinError
		want string
	}{
		{&PinError{Cluster: "mars", Type: "v7x"}, "cluster mars is not registered"},
		{&PinError{Cluster: "local", Type: "v7x", Registered: true, OfferedBy: []string{"tpu-east"}},
			"cluster local lists no accelerator types, so it takes only the types no other registered cluster offers, and v7x is offered by tpu-east"},
		{&PinError{Cluster: "tpu-west", Type: "v6e", Registered: true, Offers: []string{"v7x", "cpu"}},
			"cluster tpu-west does not offer v6e; it offers v7x, cpu"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error()\n got %s\nwant %s", got, tt.want)
		}
	}
}

func TestImageNeeders(t *testing.T) {
	local := &falconv1.Cluster{Name: "local", Backend: "local"}
	gke := &falconv1.Cluster{Name: "tpu-east", Backend: "gke"}
	kube := &falconv1.Cluster{Name: "lab", Backend: "kubernetes"}
	other := &falconv1.Cluster{Name: "sim", Backend: "test"}
	tests := []struct {
		name    string
		cs      []*falconv1.Cluster
		want    []string
		wantAll bool
	}{
		{"no candidates: nothing to say", nil, nil, false},
		{"containers everywhere", []*falconv1.Cluster{gke, kube}, []string{"tpu-east", "lab"}, true},
		{"the local backend needs none", []*falconv1.Cluster{local}, nil, false},
		{"one candidate without containers is enough", []*falconv1.Cluster{gke, local}, []string{"tpu-east"}, false},
		{"an unknown backend is not held to anything", []*falconv1.Cluster{other}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, all := ImageNeeders(tt.cs)
			if diff := cmp.Diff(tt.want, got); diff != "" || all != tt.wantAll {
				t.Errorf("ImageNeeders = %v, %t; want all=%t (-want +got):\n%s", got, all, tt.wantAll, diff)
			}
		})
	}
}

func TestOverflows(t *testing.T) {
	local := &falconv1.Cluster{Name: "local", Backend: "local"}
	gke := &falconv1.Cluster{Name: "tpu-east", Backend: "gke"}
	kube := &falconv1.Cluster{Name: "lab", Backend: "kubernetes"}
	other := &falconv1.Cluster{Name: "sim", Backend: "test"}
	// n envs named AA, AB, ..., each holding value
	envs := func(n int, value string) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[string(rune('A'+i/26))+string(rune('A'+i%26))] = value
		}
		return m
	}
	big := strings.Repeat("x", 100<<10)
	// One rank's exec: "/bin/sh", "-c", the command and the config, and each
	// env as K=V, every string with its NUL and an 8-byte pointer.
	exec := func(command, config string, envs map[string]string) int {
		n := len("/bin/sh") + len("-c") + len(command) + len(config) + 4*9
		for k, v := range envs {
			n += len(k) + 1 + len(v) + 9
		}
		return n
	}
	fitsExactly := strings.Repeat("y", ArgMax-exec("", "", nil))
	tests := []struct {
		name    string
		cs      []*falconv1.Cluster
		task    *falconv1.TaskSpec
		config  string
		want    map[string]int // backend -> size over its limit
		wantAll bool
	}{
		{name: "a small task fits everywhere", cs: []*falconv1.Cluster{local, gke, kube},
			task: &falconv1.TaskSpec{Command: "echo hi", Envs: map[string]string{"A": "b"}}, config: "c"},
		{name: "the local exec exactly at ARG_MAX fits", cs: []*falconv1.Cluster{local},
			task: &falconv1.TaskSpec{Command: fitsExactly}},
		{name: "one byte more does not", cs: []*falconv1.Cluster{local},
			task: &falconv1.TaskSpec{Command: fitsExactly + "y"}, want: map[string]int{"local": ArgMax + 1}, wantAll: true},
		{name: "envs and config count on the local backend", cs: []*falconv1.Cluster{local},
			task: &falconv1.TaskSpec{Command: big, Envs: envs(19, big)}, config: big,
			want: map[string]int{"local": exec(big, big, envs(19, big))}, wantAll: true},
		{name: "a Job over etcd's limit, whose exec would fit, on both container backends", cs: []*falconv1.Cluster{gke, kube},
			task: &falconv1.TaskSpec{Command: big, Envs: envs(15, big)}, config: "c",
			want: map[string]int{"gke": 16*len(big) + 15*2 + 1, "kubernetes": 16*len(big) + 15*2 + 1}, wantAll: true},
		{name: "every $ is doubled in a Job", cs: []*falconv1.Cluster{kube},
			task: &falconv1.TaskSpec{Command: strings.Repeat("$", MaxObjectBytes/2+1)},
			want: map[string]int{"kubernetes": 2 * (MaxObjectBytes/2 + 1)}, wantAll: true},
		{name: "over the Job limit but within the local one: it may still run", cs: []*falconv1.Cluster{gke, local},
			task: &falconv1.TaskSpec{Command: big, Envs: envs(15, big)},
			want: map[string]int{"gke": 16*len(big) + 15*2}, wantAll: false},
		{name: "an unknown backend is not held to anything", cs: []*falconv1.Cluster{other},
			task: &falconv1.TaskSpec{Command: big, Envs: envs(30, big)}},
		{name: "no candidates", task: &falconv1.TaskSpec{Command: big, Envs: envs(30, big)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over, all := Overflows(tt.cs, tt.task, tt.config)
			var got map[string]int
			for _, o := range over {
				if got == nil {
					got = map[string]int{}
				}
				got[o.Backend.Name] = o.Size
				if o.Size <= o.Backend.Limit {
					t.Errorf("%s: reported size %d is within its limit %d", o.Backend.Name, o.Size, o.Backend.Limit)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || all != tt.wantAll {
				t.Errorf("Overflows all=%t, want %t (-want +got):\n%s", all, tt.wantAll, diff)
			}
		})
	}
}
