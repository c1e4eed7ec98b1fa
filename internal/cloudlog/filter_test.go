package cloudlog_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/errdefs"
)

var target = cloudlog.Target{Project: "falcon-prod", Location: "us-central2", Cluster: "tpu-v5p", Namespace: "falcon", Workload: "job-u1wm3wuha2"}

const workloadPart = `resource.type="k8s_container" AND resource.labels.project_id="falcon-prod" AND resource.labels.location="us-central2" AND resource.labels.cluster_name="tpu-v5p" AND resource.labels.namespace_name="falcon" AND labels."k8s-pod/batch_kubernetes_io/job-name"="job-u1wm3wuha2"`

func TestBuildFilter(t *testing.T) {
	since := time.Date(2026, 4, 13, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		target cloudlog.Target
		filter cloudlog.Filter
		want   string
	}{
		{
			name:   "workload only",
			target: target,
			want:   workloadPart,
		},
		{
			name:   "no location leaves the location out",
			target: cloudlog.Target{Project: "p", Cluster: "c", Namespace: "n", Workload: "w"},
			want:   `resource.type="k8s_container" AND resource.labels.project_id="p" AND resource.labels.cluster_name="c" AND resource.labels.namespace_name="n" AND labels."k8s-pod/batch_kubernetes_io/job-name"="w"`,
		},
		{
			name:   "since in UTC",
			target: target,
			filter: cloudlog.Filter{Since: since.In(time.FixedZone("CST", 8*3600))},
			want:   workloadPart + ` AND timestamp>="2026-04-13T00:00:00Z"`,
		},
		{
			name:   "since and until keep nanoseconds",
			target: target,
			filter: cloudlog.Filter{Since: since, Until: since.Add(90*time.Minute + 5)},
			want:   workloadPart + ` AND timestamp>="2026-04-13T00:00:00Z" AND timestamp<"2026-04-13T01:30:00.000000005Z"`,
		},
		{
			name:   "one rank: label equality or pod name",
			target: target,
			filter: cloudlog.Filter{Ranks: []int{0}},
			want:   workloadPart + ` AND (labels."k8s-pod/batch_kubernetes_io/job-completion-index"="0" OR resource.labels.pod_name=~"^job-u1wm3wuha2-(0)-")`,
		},
		{
			name:   "several ranks: sorted, deduplicated, one pattern per field",
			target: target,
			filter: cloudlog.Filter{Ranks: []int{12, 3, 3, 0}},
			want:   workloadPart + ` AND (labels."k8s-pod/batch_kubernetes_io/job-completion-index"=~"^(0|3|12)$" OR resource.labels.pod_name=~"^job-u1wm3wuha2-(0|3|12)-")`,
		},
		{
			name:   "grep looks at text and JSON lines",
			target: target,
			filter: cloudlog.Filter{Grep: "step_time"},
			want:   workloadPart + ` AND (textPayload=~"step_time" OR jsonPayload.message=~"step_time")`,
		},
		{
			name:   "grep with backslashes and quotes is escaped",
			target: target,
			filter: cloudlog.Filter{Grep: `loss=\d+\.\d+ "ok"`},
			want:   workloadPart + ` AND (textPayload=~"loss=\\d+\\.\\d+ \"ok\"" OR jsonPayload.message=~"loss=\\d+\\.\\d+ \"ok\"")`,
		},
		{
			name:   "values with quotes cannot break out of their string",
			target: cloudlog.Target{Project: "p", Cluster: `c" OR "1"="1`, Namespace: "n", Workload: "w"},
			want:   `resource.type="k8s_container" AND resource.labels.project_id="p" AND resource.labels.cluster_name="c\" OR \"1\"=\"1" AND resource.labels.namespace_name="n" AND labels."k8s-pod/batch_kubernetes_io/job-name"="w"`,
		},
		{
			name:   "a workload name with regexp metacharacters is quoted in the pod pattern",
			target: cloudlog.Target{Project: "p", Cluster: "c", Namespace: "n", Workload: "a.b"},
			filter: cloudlog.Filter{Ranks: []int{1}},
			want:   `resource.type="k8s_container" AND resource.labels.project_id="p" AND resource.labels.cluster_name="c" AND resource.labels.namespace_name="n" AND labels."k8s-pod/batch_kubernetes_io/job-name"="a.b" AND (labels."k8s-pod/batch_kubernetes_io/job-completion-index"="1" OR resource.labels.pod_name=~"^a\\.b-(1)-")`,
		},
		{
			name:   "tail is not part of the filter",
			target: target,
			filter: cloudlog.Filter{Tail: 100},
			want:   workloadPart,
		},
		{
			name:   "everything",
			target: target,
			filter: cloudlog.Filter{Ranks: []int{0, 1}, Since: since, Grep: "^step", Tail: 5},
			want: workloadPart + ` AND timestamp>="2026-04-13T00:00:00Z"` +
				` AND (labels."k8s-pod/batch_kubernetes_io/job-completion-index"=~"^(0|1)$" OR resource.labels.pod_name=~"^job-u1wm3wuha2-(0|1)-")` +
				` AND (textPayload=~"^step" OR jsonPayload.message=~"^step")`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cloudlog.BuildFilter(tc.target, tc.filter)
			if err != nil {
				t.Fatalf("BuildFilter: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildFilterRefusesBadInput(t *testing.T) {
	since := time.Date(2026, 4, 13, 0, 0, 0, 0, time.UTC)
	many := make([]int, 5000)
	for i := range many {
		many[i] = i
	}
	for _, tc := range []struct {
		name       string
		target     cloudlog.Target
		filter     cloudlog.Filter
		wantFields []string
	}{
		{"empty target names every missing field", cloudlog.Target{}, cloudlog.Filter{}, []string{"project", "cluster", "namespace", "workload"}},
		{"grep that is not RE2", target, cloudlog.Filter{Grep: "step_(time"}, []string{"grep"}},
		{"grep with a Perl lookahead RE2 lacks", target, cloudlog.Filter{Grep: "step(?=_time)"}, []string{"grep"}},
		{"negative tail", target, cloudlog.Filter{Tail: -1}, []string{"tail"}},
		{"negative rank", target, cloudlog.Filter{Ranks: []int{0, -2}}, []string{"ranks"}},
		{"empty ranks", target, cloudlog.Filter{Ranks: []int{}}, []string{"ranks"}},
		{"until before since", target, cloudlog.Filter{Since: since, Until: since.Add(-time.Second)}, []string{"until"}},
		{"every problem at once", cloudlog.Target{Project: "p", Cluster: "c", Namespace: "n"}, cloudlog.Filter{Grep: "(", Tail: -3}, []string{"workload", "grep", "tail"}},
		{"more ranks than a filter holds", target, cloudlog.Filter{Ranks: many}, []string{"ranks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cloudlog.BuildFilter(tc.target, tc.filter)
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("BuildFilter error = %v, want an invalid-argument error", err)
			}
			if diff := cmp.Diff(tc.wantFields, fields(err)); diff != "" {
				t.Errorf("fields named (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// fields lists the fields an errdefs field error names, in order.
func fields(err error) []string {
	var fe errdefs.FieldErrors
	if errors.As(err, &fe) {
		var out []string
		for _, e := range fe {
			out = append(out, e.Field)
		}
		return out
	}
	var one *errdefs.FieldError
	if errors.As(err, &one) {
		return []string{one.Field}
	}
	return []string{"<not a field error: " + strings.TrimSpace(err.Error()) + ">"}
}
