package cloudlog

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Label keys on a Falcon pod's container log entries. GKE copies each pod
// label into the entry's labels as "k8s-pod/" + key with the key's dots
// turned into underscores, so batch.kubernetes.io/job-name becomes
// k8s-pod/batch_kubernetes_io/job-name. (001 spells the key with dots; that
// filter matches nothing on GKE.)
const (
	JobNameLabel         = "k8s-pod/batch_kubernetes_io/job-name"
	CompletionIndexLabel = "k8s-pod/batch_kubernetes_io/job-completion-index"
)

// maxFilterLen is Cloud Logging's limit on the length of a filter.
const maxFilterLen = 20000

// Target is the workload whose container logs are read: the pods of one
// Kubernetes Job on one GKE cluster.
type Target struct {
	Project   string // Google Cloud project of the cluster (resource.labels.project_id)
	Location  string // the cluster's region or zone; optional, narrows the query
	Cluster   string // GKE cluster name
	Namespace string // Kubernetes namespace of the Job
	Workload  string // the Job's name, its pods' batch.kubernetes.io/job-name
}

// Filter selects the lines of a workload's log. It is 001's LogFilter.
type Filter struct {
	// Ranks restricts the log to these ranks (job-completion indexes); nil
	// means every rank.
	Ranks []int
	// Since keeps entries with a timestamp at or after it; zero keeps all.
	Since time.Time
	// Until keeps entries with a timestamp before it; zero keeps all.
	Until time.Time
	// Grep keeps lines matching this RE2 expression (a search, not a
	// whole-line match). Cloud Logging evaluates it, so lines that do not
	// match never leave Google.
	Grep string
	// Tail keeps only the last Tail lines of each rank; 0 keeps all.
	Tail int
}

// Validate reports every problem of t at once, naming the field.
func (t Target) Validate() error {
	var errs errdefs.FieldErrors
	for _, f := range []struct{ name, v string }{
		{"project", t.Project}, {"cluster", t.Cluster}, {"namespace", t.Namespace}, {"workload", t.Workload},
	} {
		if f.v == "" {
			errs.Add(f.name, "is required to find the workload's logs in Cloud Logging")
		}
	}
	return errs.Err()
}

// Validate reports every problem of f at once, naming the field.
func (f Filter) Validate() error {
	var errs errdefs.FieldErrors
	if f.Grep != "" {
		if _, err := regexp.Compile(f.Grep); err != nil {
			errs.Add("grep", "is not an RE2 regular expression: %v", err)
		}
	}
	if f.Tail < 0 {
		errs.Add("tail", "must be 0 (all lines) or more, got %d", f.Tail)
	}
	for _, r := range f.Ranks {
		if r < 0 {
			errs.Add("ranks", "a rank is a job-completion index, 0 or more, got %d", r)
			break
		}
	}
	if f.Ranks != nil && len(f.Ranks) == 0 {
		errs.Add("ranks", "is empty; leave it unset for every rank")
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		errs.Add("until", "must be after since (%s), got %s", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return errs.Err()
}

// BuildFilter is the Cloud Logging filter for f's lines of t: the workload's
// container entries, then f's time window, ranks and grep. Tail is not part
// of a filter; the Retriever applies it through the order and size of its
// queries.
//
// Every value is a quoted string, and every OR is in parentheses: Cloud
// Logging binds OR tighter than AND, so an unparenthesized OR would not mean
// what it reads as.
func BuildFilter(t Target, f Filter) (string, error) {
	if err := joinErrs(t.Validate(), f.Validate()); err != nil {
		return "", err
	}
	clauses := workloadClauses(t)
	clauses = append(clauses, windowClauses(f)...)
	if len(f.Ranks) > 0 {
		clauses = append(clauses, rankClause(t.Workload, f.Ranks))
	}
	if f.Grep != "" {
		q := quote(f.Grep)
		// GKE puts a plain line in textPayload and a JSON line's text in
		// jsonPayload.message; grep looks at both, as the user sees both.
		clauses = append(clauses, "(textPayload=~"+q+" OR jsonPayload.message=~"+q+")")
	}
	s := strings.Join(clauses, " AND ")
	if len(s) > maxFilterLen {
		return "", errdefs.Invalid("ranks", "select too many ranks for one Cloud Logging filter (%d characters, at most %d): ask for fewer or for all", len(s), maxFilterLen)
	}
	return s, nil
}

// workloadClauses select the containers of t's pods. The job-name label is
// what Kubernetes puts on every pod of a Job, Falcon's and xpk's alike.
func workloadClauses(t Target) []string {
	c := []string{
		`resource.type="k8s_container"`,
		"resource.labels.project_id=" + quote(t.Project),
	}
	if t.Location != "" {
		c = append(c, "resource.labels.location="+quote(t.Location))
	}
	return append(c,
		"resource.labels.cluster_name="+quote(t.Cluster),
		"resource.labels.namespace_name="+quote(t.Namespace),
		"labels."+quote(JobNameLabel)+"="+quote(t.Workload),
	)
}

func windowClauses(f Filter) []string {
	var c []string
	if !f.Since.IsZero() {
		c = append(c, "timestamp>="+quoteTime(f.Since))
	}
	if !f.Until.IsZero() {
		c = append(c, "timestamp<"+quoteTime(f.Until))
	}
	return c
}

// rankClause selects ranks by the completion-index label or, for entries
// without it, by the rank in the pod name (<job>-<index>-<suffix>). Both name
// the same rank on an Indexed Job's pods. A set of ranks is one regular
// expression per field rather than one comparison per rank, which keeps a
// filter for hundreds of ranks under Cloud Logging's length limit.
func rankClause(workload string, ranks []int) string {
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	alt := make([]string, len(rs))
	for i, r := range rs {
		alt[i] = strconv.Itoa(r)
	}
	group := strings.Join(alt, "|")
	label := "labels." + quote(CompletionIndexLabel)
	var byLabel string
	if len(rs) == 1 {
		byLabel = label + "=" + quote(group)
	} else {
		byLabel = label + "=~" + quote("^("+group+")$")
	}
	byPod := "resource.labels.pod_name=~" + quote(podPattern(workload, group))
	return "(" + byLabel + " OR " + byPod + ")"
}

// podPattern matches the pod names of the ranks in group, an alternation of
// decimal ranks.
func podPattern(workload, group string) string {
	return "^" + regexp.QuoteMeta(workload) + "-(" + group + ")-"
}

// quote writes s as a Logging query language string literal.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '"' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// quoteTime writes t in UTC with nanoseconds, so a resumed stream's
// watermark loses no precision.
func quoteTime(t time.Time) string { return quote(t.UTC().Format(time.RFC3339Nano)) }

// joinErrs merges field errors of several validators into one list, so the
// user sees every problem in one answer.
func joinErrs(errs ...error) error {
	var all errdefs.FieldErrors
	for _, err := range errs {
		switch e := err.(type) {
		case nil:
		case errdefs.FieldErrors:
			all = append(all, e...)
		case *errdefs.FieldError:
			all = append(all, e)
		default:
			return err
		}
	}
	return all.Err()
}
