package cloudlogtest

import (
	"context"
	"errors"
	"testing"
	"time"

	logging "cloud.google.com/go/logging/apiv2"
	"cloud.google.com/go/logging/apiv2/loggingpb"
	"github.com/google/go-cmp/cmp"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var w = Workload{Project: "p", Location: "us-central1", Cluster: "c", Namespace: "n", Job: "job-1"}

var t0 = time.Date(2026, 4, 13, 0, 0, 0, 0, time.UTC)

func TestFilterGrammar(t *testing.T) {
	e := w.Entry(w.Pod(3), 3, t0, `step_time: 0.5 "quoted" \ back`)
	for _, tc := range []struct {
		filter string
		match  bool
	}{
		{``, true},
		{`resource.type="k8s_container"`, true},
		{`resource.type="k8s_pod"`, false},
		{`resource.labels.cluster_name="c" AND resource.labels.namespace_name="n"`, true},
		{`resource.labels.cluster_name="c" AND resource.labels.namespace_name="x"`, false},
		{`labels."k8s-pod/batch_kubernetes_io/job-completion-index"="3"`, true},
		{`labels."k8s-pod/batch_kubernetes_io/job-completion-index"=~"^(1|3)$"`, true},
		{`labels."k8s-pod/batch_kubernetes_io/job-completion-index"=~"^(1|30)$"`, false},
		{`labels."absent"="x"`, false},
		{`labels."absent"!="x"`, true},
		{`resource.labels.pod_name!~"^job-1-(3)-"`, false},
		{`resource.labels.pod_name!="other"`, true},
		{`(textPayload=~"nomatch" OR textPayload=~"step_time")`, true},
		{`textPayload=~"\"quoted\" \\\\ back"`, true},
		{`jsonPayload.message=~"step"`, false}, // a text entry has no jsonPayload
		{`timestamp>="2026-04-13T00:00:00Z" AND timestamp<"2026-04-13T00:00:00.000000001Z"`, true},
		{`timestamp>"2026-04-13T00:00:00Z"`, false},
		{`timestamp<="2026-04-12T23:59:59Z"`, false},
	} {
		n, err := parseFilter(tc.filter)
		if err != nil {
			t.Errorf("%s: refused: %v", tc.filter, err)
			continue
		}
		if got := n.match(e); got != tc.match {
			t.Errorf("%s: match = %v, want %v", tc.filter, got, tc.match)
		}
	}
}

// Anything Falcon does not send is refused, so that a filter builder that
// drifts from what Cloud Logging means fails its tests.
func TestFilterRefusesWhatFalconDoesNotSend(t *testing.T) {
	for _, f := range []string{
		`step_time`,                      // a bare search term
		`resource.labels.cluster="c"`,    // not a k8s_container label
		`resource.labels.cluster_name=c`, // unquoted value
		`severity>="ERROR"`,              // unknown field
		`textPayload:"x"`,                // has operator
		`a="1" AND b="2" OR c="3"`,       // AND and OR unparenthesized
		`resource.type="k8s_container" OR labels."x"="1" AND labels."y"="2"`,
		`NOT resource.type="k8s_container"`,
		`(resource.type="k8s_container"`, // unbalanced
		`textPayload=~"("`,               // bad regexp
		`textPayload="\n"`,               // escape Falcon never writes
		`timestamp>="yesterday"`,
		`timestamp=~"2026"`,
		`textPayload>="a"`,
		`resource.type="k8s_container" AND`,
		string(make([]byte, maxFilterLen+1)),
	} {
		if _, err := parseFilter(f); err == nil {
			t.Errorf("%.60q: accepted, want refused", f)
		}
	}
}

func TestListPagesBothWays(t *testing.T) {
	s := Start(t)
	c, err := logging.NewClient(context.Background(), s.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 7 {
		s.Append(w.Entry(w.Pod(0), 0, t0.Add(time.Duration(i)*time.Second), string(rune('a'+i))))
	}
	list := func(order string, size int32) ([]string, error) {
		it := c.ListLogEntries(context.Background(), &loggingpb.ListLogEntriesRequest{
			ResourceNames: []string{"projects/p"}, OrderBy: order, PageSize: size,
			Filter: `resource.type="k8s_container"`,
		}, gax.WithRetry(nil))
		var out []string
		for {
			e, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, e.GetTextPayload())
		}
	}
	asc, err := list("", 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e", "f", "g"}, asc); diff != "" {
		t.Errorf("asc (-want +got):\n%s", diff)
	}
	desc, err := list("timestamp desc", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"g", "f", "e", "d", "c", "b", "a"}, desc); diff != "" {
		t.Errorf("desc (-want +got):\n%s", diff)
	}
	if s.Calls(ListLogEntries) != 3+4 {
		t.Errorf("%d calls, want 3 pages asc and 4 desc", s.Calls(ListLogEntries))
	}
	for _, bad := range []struct {
		order string
		size  int32
	}{{"severity", 1}, {"", 1001}, {"", -1}} {
		if _, err := list(bad.order, bad.size); status.Code(err) != codes.InvalidArgument {
			t.Errorf("order %q size %d: %v, want InvalidArgument", bad.order, bad.size, err)
		}
	}
	it := c.ListLogEntries(context.Background(), &loggingpb.ListLogEntriesRequest{ResourceNames: []string{"projects/p", "projects/q"}}, gax.WithRetry(nil))
	if _, err := it.Next(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("two projects: %v, want InvalidArgument", err)
	}
}
