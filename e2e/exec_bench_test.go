package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// execRounds is how many `exec -- true` the round-trip figures take.
const execRounds = 50

// roundTrips runs `true` execRounds times through the client the CLI uses
// (its WebSocket to the API server) and reports p50 and p99.
func roundTrips(b *testing.B, c *client.Client, id string) {
	b.Helper()
	var ds []time.Duration
	for range execRounds {
		t0 := time.Now()
		exit, err := c.Exec(context.Background(), &falconv1.ExecStart{ExpId: id, Command: []string{"true"}}, client.ExecIO{Stdout: io.Discard, Stderr: io.Discard})
		if err != nil || exit.GetCode() != 0 {
			b.Fatalf("exec true: %v %v", exit, err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkExecDev: `falcon exp exec -- true` round trips on falcon dev.
func BenchmarkExecDev(b *testing.B) {
	d, id, _ := startDevExec(b, "bench-exec-dev")
	c, err := client.New("http://" + d.http)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		roundTrips(b, c, id)
	}
}

// BenchmarkExecKube: on a Kubernetes edge cluster (its kube-apiserver's
// streaming proxy, kwok's kubelet endpoint), `exec -- true` round trips;
// stdout throughput; and `exp cp` of FALCON_CP_MIB (256 by default) up
// and down, each next to plain client-go remotecommand (kubectl's
// WebSocket-then-SPDY executor) against the same pod in the same run.
func BenchmarkExecKube(b *testing.B) {
	k := startKubeExec(b, "bench-exec-kube")
	c, err := client.New("http://" + k.d.http)
	if err != nil {
		b.Fatal(err)
	}
	mib := envMiB(b, "FALCON_CP_MIB", 256)
	size := int64(mib) << 20
	file := filepath.Join(b.TempDir(), "payload.bin")
	writeRandom(b, file, mib)
	remote := k.work[0]
	for b.Loop() {
		roundTrips(b, c, k.id)
		var plainRT []time.Duration
		for range execRounds {
			plainRT = append(plainRT, timed(b, func() { plainExec(b, k.c, k.pods[0], []string{"true"}, nil, io.Discard) }))
		}
		slices.Sort(plainRT)
		b.ReportMetric(float64(plainRT[len(plainRT)/2].Microseconds())/1000, "p50-plain-ms")
		b.ReportMetric(float64(plainRT[len(plainRT)*99/100].Microseconds())/1000, "p99-plain-ms")

		out := []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero", size)}
		falcon := timed(b, func() {
			exit, err := c.Exec(context.Background(), &falconv1.ExecStart{ExpId: k.id, Command: out}, client.ExecIO{Stdout: io.Discard, Stderr: io.Discard})
			if err != nil || exit.GetCode() != 0 {
				b.Fatalf("exec: %v %v", exit, err)
			}
		})
		plain := timed(b, func() { plainExec(b, k.c, k.pods[0], out, nil, io.Discard) })
		b.ReportMetric(mbps(size, falcon), "stdout-MB/s")
		b.ReportMetric(mbps(size, plain), "stdout-plain-MB/s")
		b.ReportMetric(plain.Seconds()/falcon.Seconds(), "stdout-ratio")

		up := timed(b, func() {
			if r := k.d.run("", "exp", "cp", file, k.id+":"+remote+"/up.bin"); r.code != 0 {
				b.Fatalf("cp up: %d %s", r.code, r.stderr)
			}
		})
		plainUp := timed(b, func() {
			f, err := os.Open(file)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			// head -c, as exp cp: kwok never closes the command's stdin.
			plainExec(b, k.c, k.pods[0], []string{"sh", "-c", fmt.Sprintf("head -c %d > %s/plain.bin", size, remote)}, f, io.Discard)
		})
		down := timed(b, func() {
			if r := k.d.run("", "exp", "cp", k.id+":"+remote+"/up.bin", filepath.Join(b.TempDir(), "down.bin")); r.code != 0 {
				b.Fatalf("cp down: %d %s", r.code, r.stderr)
			}
		})
		// A copy down lands in a file, as kubectl cp's does: the baseline
		// writes one too, so both pay for the local write.
		plainDown := timed(b, func() {
			f, err := os.Create(filepath.Join(b.TempDir(), "plain-down.bin"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			plainExec(b, k.c, k.pods[0], []string{"cat", remote + "/plain.bin"}, nil, f)
		})
		b.ReportMetric(mbps(size, up), "cp-up-MB/s")
		b.ReportMetric(mbps(size, plainUp), "cp-up-plain-MB/s")
		b.ReportMetric(plainUp.Seconds()/up.Seconds(), "cp-up-ratio")
		b.ReportMetric(mbps(size, down), "cp-down-MB/s")
		b.ReportMetric(mbps(size, plainDown), "cp-down-plain-MB/s")
		b.ReportMetric(plainDown.Seconds()/down.Seconds(), "cp-down-ratio")
	}
}

func timed(b *testing.B, f func()) time.Duration {
	b.Helper()
	t0 := time.Now()
	f()
	return time.Since(t0)
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

// plainExec is the baseline: client-go's remotecommand straight to the
// edge cluster's apiserver, as kubectl exec does, stdout to out.
func plainExec(b *testing.B, c *kubeenv.Cluster, pod string, argv []string, stdin io.Reader, out io.Writer) {
	b.Helper()
	req := c.Clientset().CoreV1().RESTClient().Post().Resource("pods").Namespace(kubeNamespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "task", Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	cfg := restConfig(b, c)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		b.Fatal(err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		b.Fatal(err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: stdin, Stdout: out, Stderr: io.Discard}); err != nil {
		b.Fatalf("plain exec %v: %v", argv, err)
	}
}

func restConfig(b *testing.B, c *kubeenv.Cluster) *rest.Config {
	b.Helper()
	return c.RESTConfig()
}
