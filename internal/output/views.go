package output

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// The views below are the table form of Falcon's resources. They live here,
// not in the commands, because several commands show the same resource (exp
// get and exp wait print an experiment's detail; exp get and job list show
// jobs) and should show it the same way.

// ExperimentColumns are the columns of `falcon exp list`; -o wide adds the
// Message (why it waits: it mirrors its most advanced waiting job's) and
// the tags.
func ExperimentColumns(v View) []Column[*falconv1.Experiment] {
	cols := []Column[*falconv1.Experiment]{
		{"ID", func(e *falconv1.Experiment) string { return e.GetId() }},
		{"NAME", func(e *falconv1.Experiment) string { return e.GetName() }},
		{"TYPE", func(e *falconv1.Experiment) string { return e.GetExpType() }},
		{"CLUSTER", func(e *falconv1.Experiment) string { return e.GetClusterName() }},
		{"STATUS", func(e *falconv1.Experiment) string { return v.Status(e.GetStatus()) }},
		{"REASON", func(e *falconv1.Experiment) string { return e.GetReason() }},
		{"AGE", func(e *falconv1.Experiment) string { return Age(v.Now, e.GetCreatedAt()) }},
		{"CREATOR", func(e *falconv1.Experiment) string { return e.GetCreator() }},
	}
	if v.Wide {
		cols = append(cols,
			Column[*falconv1.Experiment]{"TAGS", func(e *falconv1.Experiment) string { return strings.Join(e.GetTags(), ",") }},
			Column[*falconv1.Experiment]{"MESSAGE", func(e *falconv1.Experiment) string { return e.GetMessage() }})
	}
	return cols
}

// ExperimentList is the table view of a ListExpsResponse.
func ExperimentList(resp *falconv1.ListExpsResponse) TableFunc {
	return func(v View) error {
		return writeList(v, "experiments", resp.GetItems(), ExperimentColumns(v), resp.GetNextPageToken())
	}
}

// JobColumns are the columns of `falcon job list`; -o wide adds the node
// pool and the Message, which says why a job waits (its queue position,
// what it is provisioning) or why it failed.
func JobColumns(v View) []Column[*falconv1.Job] {
	cols := []Column[*falconv1.Job]{
		{"ID", func(j *falconv1.Job) string { return j.GetId() }},
		{"EXP", func(j *falconv1.Job) string { return j.GetExpId() }},
		{"ROLE", func(j *falconv1.Job) string { return j.GetRole() }},
		{"CLUSTER", func(j *falconv1.Job) string { return j.GetClusterName() }},
		{"STATUS", func(j *falconv1.Job) string { return v.Status(j.GetStatus()) }},
		{"REASON", func(j *falconv1.Job) string { return j.GetReason() }},
		{"REPLICA", func(j *falconv1.Job) string { return strconv.Itoa(int(j.GetReplica())) }},
		{"AGE", func(j *falconv1.Job) string { return Age(v.Now, j.GetCreatedAt()) }},
	}
	if v.Wide {
		cols = append(cols,
			Column[*falconv1.Job]{"NODE POOL", func(j *falconv1.Job) string { return j.GetNodePool() }},
			Column[*falconv1.Job]{"MESSAGE", func(j *falconv1.Job) string { return j.GetMessage() }})
	}
	return cols
}

// JobList is the table view of a ListJobsResponse.
func JobList(resp *falconv1.ListJobsResponse) TableFunc {
	return func(v View) error {
		return writeList(v, "jobs", resp.GetItems(), JobColumns(v), resp.GetNextPageToken())
	}
}

// ClusterColumns are the columns of `falcon cluster list`.
func ClusterColumns(v View) []Column[*falconv1.Cluster] {
	return []Column[*falconv1.Cluster]{
		{"NAME", func(c *falconv1.Cluster) string { return c.GetName() }},
		{"ID", func(c *falconv1.Cluster) string { return c.GetId() }},
		{"BACKEND", func(c *falconv1.Cluster) string { return c.GetBackend() }},
		{"STATUS", func(c *falconv1.Cluster) string { return v.Status(c.GetStatus()) }},
		{"ACCELERATORS", func(c *falconv1.Cluster) string { return strings.Join(c.GetAcceleratorTypes(), ",") }},
		{"NAMESPACE", func(c *falconv1.Cluster) string { return c.GetNamespace() }},
		{"LOCATION", func(c *falconv1.Cluster) string { return c.GetLocation() }},
	}
}

// ClusterList is the table view of a ListClustersResponse.
func ClusterList(resp *falconv1.ListClustersResponse) TableFunc {
	return func(v View) error {
		return writeList(v, "clusters", resp.GetItems(), ClusterColumns(v), "")
	}
}

func writeList[T any](v View, noun string, items []T, cols []Column[T], next string) error {
	if len(items) == 0 {
		_, err := fmt.Fprintf(v.Notes, "No %s found.\n", noun)
		return err
	}
	if v.Markdown {
		headers := make([]string, len(cols))
		for i, c := range cols {
			headers[i] = c.Header
		}
		rows := make([][]string, len(items))
		for j, it := range items {
			rows[j] = make([]string, len(cols))
			for i, c := range cols {
				rows[j][i] = c.Value(it)
			}
		}
		if err := WriteMarkdown(v.Out, headers, rows); err != nil {
			return err
		}
	} else if err := WriteTable(v.Out, cols, items); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(v.Notes, "More %s: repeat with --page-token %s\n", noun, next)
	}
	return nil
}

// ExperimentDetail is the view of `falcon exp get` and `falcon exp wait`: the
// experiment's fields, its roles, its jobs and its artifact.
func ExperimentDetail(e *falconv1.Experiment) TableFunc {
	return func(v View) error {
		fields := []Field{
			{"ID", e.GetId()},
			{"Name", e.GetName()},
			{"Type", e.GetExpType()},
			{"Cluster", e.GetClusterName()},
			{"Status", v.Status(e.GetStatus())},
			{"Reason", e.GetReason()},
			{"Message", e.GetMessage()},
			{"Creator", e.GetCreator()},
			{"Priority", strconv.Itoa(int(e.GetPriority()))},
			{"Tags", strings.Join(e.GetTags(), ", ")},
			{"Created", Timestamp(v.Now, e.GetCreatedAt())},
			{"Started", Timestamp(v.Now, e.GetStartedAt())},
			{"Finished", Timestamp(v.Now, e.GetFinishedAt())},
			{"Aborted", Timestamp(v.Now, e.GetAbortedAt())},
		}
		if ttl := TTLLine(v.Now, e); ttl != "" {
			fields = append(fields, Field{"TTL", ttl})
		}
		if a := e.GetArtifact(); a != nil {
			fields = append(fields, Field{"Artifact", artifactLine(a)})
		} else {
			fields = append(fields, Field{"Artifact", e.GetArtifactPath()})
		}
		if err := WriteFields(v.Out, fields); err != nil {
			return err
		}
		if err := writeRoles(v.Out, e.GetRoleToTaskSpec()); err != nil {
			return err
		}
		if jobs := e.GetJobs(); len(jobs) > 0 {
			fmt.Fprintln(v.Out, "\nJobs:")
			if err := WriteTable(v.Out, expJobColumns(v), jobs); err != nil {
				return err
			}
		}
		return nil
	}
}

// expJobColumns are the jobs of one experiment: no EXP column (it is the
// experiment shown) but the message, which says why a job waits or failed.
func expJobColumns(v View) []Column[*falconv1.Job] {
	return []Column[*falconv1.Job]{
		{"ID", func(j *falconv1.Job) string { return j.GetId() }},
		{"ROLE", func(j *falconv1.Job) string { return j.GetRole() }},
		{"STATUS", func(j *falconv1.Job) string { return v.Status(j.GetStatus()) }},
		{"REASON", func(j *falconv1.Job) string { return j.GetReason() }},
		{"MESSAGE", func(j *falconv1.Job) string { return j.GetMessage() }},
		{"REPLICA", func(j *falconv1.Job) string { return strconv.Itoa(int(j.GetReplica())) }},
	}
}

func artifactLine(a *falconv1.Artifact) string {
	parts := []string{a.GetId(), a.GetStatus()}
	if a.GetReason() != "" {
		parts = append(parts, "("+a.GetReason()+")")
	}
	if a.GetPath() != "" {
		parts = append(parts, a.GetPath())
	}
	if a.GetIndexedAt() != nil {
		kept := fmt.Sprintf("(%s, %s kept", Files(a.GetFileCount()), Bytes(a.GetByteCount()))
		if !a.GetIndexComplete() {
			kept += " so far"
		}
		parts = append(parts, kept+")")
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " ")
}

func writeRoles(w io.Writer, roles map[string]*falconv1.TaskSpec) error {
	if len(roles) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nRoles:")
	names := make([]string, 0, len(roles))
	for n := range roles {
		names = append(names, n)
	}
	slices.Sort(names)
	return WriteTable(w, roleColumns, names2specs(names, roles))
}

type namedSpec struct {
	name string
	spec *falconv1.TaskSpec
}

func names2specs(names []string, roles map[string]*falconv1.TaskSpec) []namedSpec {
	out := make([]namedSpec, len(names))
	for i, n := range names {
		out[i] = namedSpec{n, roles[n]}
	}
	return out
}

var roleColumns = []Column[namedSpec]{
	{"ROLE", func(r namedSpec) string { return r.name }},
	{"REPLICA", func(r namedSpec) string { return strconv.Itoa(int(r.spec.GetReplica())) }},
	{"DEVICE", func(r namedSpec) string { return r.spec.GetDeviceType() }},
	{"COUNT", func(r namedSpec) string { return nonZero(r.spec.GetDeviceCount()) }},
	{"TOPO", func(r namedSpec) string { return r.spec.GetDeviceTopo() }},
	{"IMAGE", func(r namedSpec) string { return r.spec.GetImage() }},
}

// JobDetail is the view of `falcon job get`.
func JobDetail(j *falconv1.Job) TableFunc {
	return func(v View) error {
		ts := j.GetTaskSpec()
		return WriteFields(v.Out, []Field{
			{"ID", j.GetId()},
			{"Experiment", strings.TrimSpace(j.GetExpId() + " " + quoteIf(j.GetExpName()))},
			{"Role", j.GetRole()},
			{"Type", j.GetExpType()},
			{"Cluster", j.GetClusterName()},
			{"Node pool", j.GetNodePool()},
			{"Status", v.Status(j.GetStatus())},
			{"Reason", j.GetReason()},
			{"Message", j.GetMessage()},
			{"Selection", j.GetSelection().GetReason()},
			{"Creator", j.GetCreator()},
			{"Replica", strconv.Itoa(int(j.GetReplica()))},
			{"Device", deviceLine(ts)},
			{"Resources", resourcesLine(ts.GetResources())},
			{"Image", ts.GetImage()},
			{"Created", Timestamp(v.Now, j.GetCreatedAt())},
			{"Dispatched", Timestamp(v.Now, j.GetDispatchedAt())},
			{"Started", Timestamp(v.Now, j.GetStartedAt())},
			{"Finished", Timestamp(v.Now, j.GetFinishedAt())},
			{"Aborted", Timestamp(v.Now, j.GetAbortedAt())},
			{"Artifact", strings.TrimSpace(j.GetArtifactId() + " " + j.GetArtifactPath())},
		})
	}
}

func deviceLine(ts *falconv1.TaskSpec) string {
	if ts.GetDeviceType() == "" && ts.GetDeviceTopo() == "" {
		return ""
	}
	s := ts.GetDeviceType()
	if ts.GetDeviceCount() > 0 {
		s += fmt.Sprintf(" x%d per host", ts.GetDeviceCount())
	}
	if ts.GetDeviceTopo() != "" {
		s += ", topology " + ts.GetDeviceTopo()
	}
	return strings.TrimSpace(s)
}

// resourcesLine shows a task's resources as they were written:
// "requests cpu=2 memory=4Gi; limits memory=8Gi".
func resourcesLine(r *falconv1.Resources) string {
	var parts []string
	for _, side := range []struct {
		name string
		m    map[string]string
	}{{"requests", r.GetRequests()}, {"limits", r.GetLimits()}} {
		if len(side.m) == 0 {
			continue
		}
		names := make([]string, 0, len(side.m))
		for n := range side.m {
			names = append(names, n)
		}
		slices.Sort(names)
		s := side.name
		for _, n := range names {
			s += " " + n + "=" + side.m[n]
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func quoteIf(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// ClusterDetail is the view of `falcon cluster get`.
func ClusterDetail(c *falconv1.Cluster) TableFunc {
	return func(v View) error {
		bucket := c.GetGcsBucket()
		if bucket != "" {
			bucket = "gs://" + bucket
		}
		return WriteFields(v.Out, []Field{
			{"Name", c.GetName()},
			{"ID", c.GetId()},
			{"Backend", c.GetBackend()},
			{"Status", v.Status(c.GetStatus())},
			{"Accelerators", acceleratorsLine(c)},
			{"Namespace", c.GetNamespace()},
			{"Service account", c.GetServiceAccount()},
			{"Project", c.GetProject()},
			{"Location", c.GetLocation()},
			{"GKE cluster", c.GetGkeCluster()},
			{"Kubeconfig", c.GetKubeconfig()},
			{"Context", c.GetKubeContext()},
			{"Max queue depth", nonZero(c.GetMaxQueueDepth())},
			{"GCS bucket", bucket},
			{"Reservation", c.GetDefaultReservation()},
			{"Labels", labelsLine(c.GetLabels())},
			{"Created", Timestamp(v.Now, c.GetCreatedAt())},
		})
	}
}

// acceleratorsLine shows the types most preferred first, with their
// priorities: "v7x (priority 1), v6e (priority 2)".
func acceleratorsLine(c *falconv1.Cluster) string {
	if len(c.GetAccelerators()) == 0 {
		return strings.Join(c.GetAcceleratorTypes(), ", ")
	}
	parts := make([]string, len(c.GetAccelerators()))
	for i, a := range c.GetAccelerators() {
		parts[i] = fmt.Sprintf("%s (priority %d)", a.GetType(), a.GetPriority())
	}
	return strings.Join(parts, ", ")
}

// labelsLine shows labels sorted by key: "env=prod, team=gpu".
func labelsLine(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + labels[k]
	}
	return strings.Join(keys, ", ")
}

// nonZero formats n, or "" (shown as "-") when it is 0 and so unset.
func nonZero(n int32) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(int(n))
}

// TTLLine says how long an experiment has left: "1h23m left (until
// 2026-12-01 18:00 UTC)", or "2h from when it runs"; with idle_ttl, how
// long it may stay idle. Empty when it has neither.
func TTLLine(now time.Time, e *falconv1.Experiment) string {
	var parts []string
	st := e.GetStatus()
	ended := st == "Succeeded" || st == "Failed" || st == "Aborted"
	switch {
	case e.ExpiresAt != nil && !ended:
		at := e.GetExpiresAt().AsTime()
		left := at.Sub(now).Round(time.Second)
		if left < 0 {
			left = 0
		}
		parts = append(parts, fmt.Sprintf("%s left (until %s)", left, at.UTC().Format("2006-01-02 15:04:05 UTC")))
	case e.Ttl != nil && !ended:
		parts = append(parts, e.GetTtl().AsDuration().String()+" from when it runs")
	case e.Ttl != nil:
		parts = append(parts, e.GetTtl().AsDuration().String())
	}
	if e.IdleTtl != nil {
		parts = append(parts, "idle_ttl "+e.GetIdleTtl().AsDuration().String())
	}
	if e.GetInteractive() {
		parts = append(parts, "interactive")
	}
	return strings.Join(parts, "; ")
}
