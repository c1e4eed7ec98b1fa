package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// apiserverWork reads what the edges' apiservers did so far, summed over
// the edges: requests by verb and resource, watch events sent by kind,
// and the requests' summed latency. Only when FALCON_BENCH_APISERVER is
// set (nil otherwise): printed per phase by printWork, it shows where a
// dispatch run's apiserver time went, and that Falcon's phase asks for
// what the ideal's does.
func apiserverWork(edges []*kubeenv.Cluster) map[string]float64 {
	if os.Getenv("FALCON_BENCH_APISERVER") == "" {
		return nil
	}
	out := map[string]float64{}
	for _, e := range edges {
		body, err := e.Clientset().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			fmt.Println("apiserver work:", err)
			continue
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			fmt.Println("apiserver work:", err)
		}
		for _, name := range []string{"apiserver_request_total", "apiserver_watch_events_total", "apiserver_request_duration_seconds"} {
			f := fams[name]
			for _, m := range f.GetMetric() {
				lv := map[string]string{}
				for _, l := range m.GetLabel() {
					lv[l.GetName()] = l.GetValue()
				}
				key := name + " " + lv["verb"] + " " + lv["resource"] + lv["kind"] + lv["subresource"]
				if m.Histogram != nil {
					out[key+" sum"] += m.GetHistogram().GetSampleSum()
				} else {
					out[key] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// printWork prints what the apiservers did between two readings of
// apiserverWork, largest first.
func printWork(label string, a, b map[string]float64) {
	if b == nil {
		return
	}
	var keys []string
	for k := range b {
		if b[k]-a[k] > 0.5 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return b[keys[i]]-a[keys[i]] > b[keys[j]]-a[keys[j]] })
	fmt.Println("apiserver work,", label)
	for _, k := range keys {
		fmt.Printf("  %-90s %10.1f\n", k, b[k]-a[k])
	}
}
