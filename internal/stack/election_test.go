package stack

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/leader"
)

func TestLeaderElectMode(t *testing.T) {
	inPod := func(k string) string {
		if k == inKubernetesEnv {
			return "10.0.0.1"
		}
		return ""
	}
	outside := func(string) string { return "" }
	tests := []struct {
		name    string
		cfg     LeaderConfig
		want    string
		wantErr string
	}{
		{"auto in a pod is a Lease", LeaderConfig{Mode: LeaderElectAuto, Getenv: inPod}, LeaderElectLease, ""},
		{"auto in a pod prefers the Lease to a DSN", LeaderConfig{Mode: LeaderElectAuto, DSN: "root@tcp(db)/f", Getenv: inPod}, LeaderElectLease, ""},
		{"auto outside with a DSN is MySQL", LeaderConfig{Mode: LeaderElectAuto, DSN: "root@tcp(db)/f", Getenv: outside}, LeaderElectMySQL, ""},
		{"auto outside without a DSN is off", LeaderConfig{Mode: LeaderElectAuto, Getenv: outside}, LeaderElectOff, ""},
		{"empty is auto", LeaderConfig{Getenv: outside}, LeaderElectOff, ""},
		{"explicit modes are kept", LeaderConfig{Mode: LeaderElectMySQL, Getenv: inPod}, LeaderElectMySQL, ""},
		{"off in a pod", LeaderConfig{Mode: LeaderElectOff, Getenv: inPod}, LeaderElectOff, ""},
		{"unknown mode names the flag and the choices", LeaderConfig{Mode: "Lease", Getenv: outside}, "", `--leader-elect: "Lease" is not supported; allowed: auto, lease, mysql, off`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := tt.cfg.mode()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("mode = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLeaderElectorErrorsNameTheFlag(t *testing.T) {
	outside := func(string) string { return "" }
	dsn := "root@tcp(127.0.0.1:1)/falcon"
	timing := func(lease, renew, retry time.Duration) leader.Timing {
		return leader.Timing{LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry}
	}
	tests := []struct {
		name string
		cfg  LeaderConfig
		want string
	}{
		{"mysql needs a DSN", LeaderConfig{Mode: LeaderElectMySQL, Timing: leader.DefaultTiming, Getenv: outside}, "--leader-elect-dsn: is required"},
		{"a DSN that does not parse", LeaderConfig{Mode: LeaderElectMySQL, DSN: "not a dsn", Timing: leader.DefaultTiming, Getenv: outside}, "--leader-elect-dsn:"},
		{"retry period not positive", LeaderConfig{Mode: LeaderElectMySQL, DSN: dsn, Timing: timing(8*time.Second, 5*time.Second, 0), Getenv: outside}, "--leader-elect-retry-period: must be positive"},
		{"renew deadline within the jittered retry", LeaderConfig{Mode: LeaderElectMySQL, DSN: dsn, Timing: timing(8*time.Second, time.Second, time.Second), Getenv: outside}, "--leader-elect-renew-deadline: must exceed 1.2 x the retry period"},
		{"lease not above the renew deadline", LeaderConfig{Mode: LeaderElectMySQL, DSN: dsn, Timing: timing(5*time.Second, 5*time.Second, time.Second), Getenv: outside}, "--leader-elect-lease-duration: must exceed the renew deadline"},
		{"lease in fractions of a second", LeaderConfig{Mode: LeaderElectMySQL, DSN: dsn, Timing: timing(8500*time.Millisecond, 5*time.Second, time.Second), Getenv: outside}, "--leader-elect-lease-duration: must be whole seconds"},
		{"a lock name too long for the server", LeaderConfig{Mode: LeaderElectMySQL, DSN: dsn, Name: strings.Repeat("x", 60), Timing: leader.DefaultTiming, Getenv: outside}, "--leader-elect-name:"},
		{"a Lease outside a pod needs a kubeconfig", LeaderConfig{Mode: LeaderElectLease, Timing: leader.DefaultTiming, Getenv: outside}, "--leader-elect-kubeconfig: is required outside a Kubernetes pod"},
		{"a kubeconfig that does not exist", LeaderConfig{Mode: LeaderElectLease, Kubeconfig: "/nonexistent/kubeconfig", Timing: leader.DefaultTiming, Getenv: outside}, "--leader-elect-kubeconfig:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Mode == LeaderElectLease && tt.cfg.Kubeconfig == "" && os.Getenv(inKubernetesEnv) != "" {
				t.Skip("in a pod, client-go finds the in-cluster config")
			}
			e, done, err := tt.cfg.Elector(nil)
			if err == nil {
				done()
				t.Fatalf("Elector = %T, want an error containing %q", e, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}
