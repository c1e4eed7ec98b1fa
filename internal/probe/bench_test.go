package probe_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/probe"
	"github.com/falconhq/falcon/internal/xpk"
	"github.com/falconhq/falcon/internal/xpk/xpktest"
)

// BenchmarkProbe50 probes 50 clusters in one round, half of them slow or
// unreachable: 25 xpk clusters that answer (through the xpk double, a real
// process per probe), 10 xpk clusters whose xpk hangs past the timeout, 8
// Kubernetes clusters whose apiserver accepts connections and never
// answers, and 7 whose apiserver refuses them. Timeouts are 1-3s; the
// round's wall time is reported next to the largest.
func BenchmarkProbe50(b *testing.B) {
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer hang.Close()
	go func() {
		var held []net.Conn // accepted and never answered
		for {
			c, err := hang.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	refused, _ := net.Listen("tcp", "127.0.0.1:0")
	refusedAddr := refused.Addr().String()
	refused.Close()

	var clusters []*falconv1.Cluster
	creds := perCluster{}
	rows := map[string]xpktest.Row{"w1": row("QuotaReserved", "", "waiting"), "w2": row("Admitted", "4", "Admitted")}
	for i := range 50 {
		name := fmt.Sprintf("c%02d", i)
		var c *falconv1.Cluster
		switch {
		case i < 25:
			c, creds[name] = xpkCluster(b, name, rows)
		case i < 35:
			c, creds[name] = xpkCluster(b, name, nil, "FAKEXPK_DELAY=30s")
		default:
			c = &falconv1.Cluster{Name: name, Backend: "kubernetes", KubeContext: name, Status: "active"}
			c.Labels = map[string]string{"addr": refusedAddr}
			if i < 43 {
				c.Labels["addr"] = hang.Addr().String()
			}
		}
		c.ProbeTimeoutS = int32(1 + i%3)
		clusters = append(clusters, c)
	}
	p := probe.New(probe.WithXpk(xpk.New(), creds), probe.WithKube(func(_ context.Context, c *falconv1.Cluster) (*rest.Config, string, error) {
		return &rest.Config{Host: "https://" + c.GetLabels()["addr"], TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, "default", nil
	}))
	var largest time.Duration
	for _, c := range clusters {
		largest = max(largest, probe.Timeout(c))
	}
	b.ResetTimer()
	var wall time.Duration
	for range b.N {
		start := time.Now()
		res := p.Probe(context.Background(), clusters)
		wall += time.Since(start)
		up := 0
		for _, r := range res {
			if r.GetReachable() {
				up++
			}
		}
		if up != 25 {
			b.Fatalf("%d clusters reachable, want 25", up)
		}
	}
	b.ReportMetric((wall / time.Duration(b.N)).Seconds(), "wall_s/round")
	b.ReportMetric(largest.Seconds(), "largest_timeout_s")
}
