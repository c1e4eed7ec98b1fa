package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// row is one workload as xpk's table shows it.
type row struct {
	Name       string `json:"name"`
	Created    string `json:"created"`
	Priority   string `json:"priority"`
	Needed     string `json:"needed"`
	Running    string `json:"running"`
	Done       string `json:"done"`
	Status     string `json:"status"`
	Message    string `json:"message"`
	StatusTime string `json:"status_time"`
}

func run(args []string, stdout, stderr io.Writer) int {
	logInvocation(args)
	if d, err := time.ParseDuration(os.Getenv("FAKEXPK_DELAY")); err == nil && d > 0 {
		// A slow xpk, for the prober's timeout tests: this is the double
		// being slow, not a loop waiting on anything.
		time.Sleep(d)
	}
	p, verb, rest, uerr := route(args)
	if uerr == nil {
		var opts parsed
		var unknown []string
		opts, unknown, uerr = p.parse(rest)
		if uerr == nil && len(unknown) > 0 {
			uerr = &usageError{usage: topUsage, msg: "xpk: error: unrecognized arguments: " + strings.Join(unknown, " ")}
		}
		if uerr == nil {
			return do(verb, opts, stdout, stderr)
		}
	}
	if uerr.msg == "" { // -h
		fmt.Fprintln(stdout, uerr.usage)
		return 0
	}
	fmt.Fprintln(stderr, uerr.usage)
	fmt.Fprintln(stderr, uerr.msg)
	return 2
}

func logInvocation(args []string) {
	path := os.Getenv("FAKEXPK_LOG")
	if path == "" {
		return
	}
	line, _ := json.Marshal(map[string]any{"args": args})
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(line, '\n'))
}

func xpkPrint(w io.Writer, format string, args ...any) { fmt.Fprintf(w, "[XPK] "+format+"\n", args...) }

func do(verb string, o parsed, stdout, stderr io.Writer) int {
	xpkPrint(stdout, "Starting xpk v0.14.3")
	if f, on := os.Getenv("FAKEXPK_FAIL"), os.Getenv("FAKEXPK_FAIL_ON"); f != "" && (on == "" || on == verb) {
		code, msg, _ := strings.Cut(f, ":")
		n, err := strconv.Atoi(code)
		if err != nil || n == 0 {
			n = 1
		}
		fmt.Fprintln(stderr, msg)
		xpkPrint(stdout, "XPK failed, error code %d", n)
		return n
	}
	st, err := openStore()
	if err != nil {
		fmt.Fprintln(stderr, err)
		xpkPrint(stdout, "XPK failed, error code 1")
		return 1
	}
	cluster, project, zone := o.str("--cluster"), o.str("--project"), o.str("--zone")
	xpkPrint(stdout, "Working on %s and %s", project, zone)
	xpkPrint(stdout, "Task: `get-credentials to cluster %s` is implemented by `gcloud container clusters get-credentials %s --zone=%s --project=%s && kubectl config view && kubectl config set-context --current --namespace=default`, hiding output unless there is an error.", cluster, cluster, zone, project)
	ctx := context.Background()
	switch verb {
	case "create":
		name := o.str("--workload")
		xpkPrint(stdout, "Starting workload create")
		exists, err := st.exists(ctx, name)
		if err != nil {
			fmt.Fprintln(stderr, err)
			xpkPrint(stdout, "XPK failed, error code 1")
			return 1
		}
		if exists {
			xpkPrint(stdout, "Workload with name %s already exists. Please pick a new workload name", name)
			xpkPrint(stdout, "XPK failed, error code 1")
			return 1
		}
		if err := st.create(ctx, o); err != nil {
			fmt.Fprintln(stderr, err)
			xpkPrint(stdout, "Create Workload request returned ERROR 1")
			xpkPrint(stdout, "XPK failed, error code 1")
			return 1
		}
		xpkPrint(stdout, "Task: `Creating Workload` terminated with code `0`")
		xpkPrint(stdout, "Follow your workload here: https://console.cloud.google.com/kubernetes/service/%s/%s/default/%s/details?project=%s", zone, cluster, name, project)
		xpkPrint(stdout, "Exiting XPK cleanly")
		return 0
	case "delete":
		name := o.str("--workload")
		xpkPrint(stdout, "Starting Workload delete")
		if name == "" {
			xpkPrint(stdout, "There are no workloads to delete matching the filter in the cluster.")
			xpkPrint(stdout, "Exiting XPK cleanly")
			return 0
		}
		xpkPrint(stdout, "Task: `Delete Workload` is implemented by `kubectl delete jobset %s -n default`, streaming output live.", name)
		found, err := st.remove(ctx, name)
		switch {
		case err != nil:
			fmt.Fprintln(stderr, err)
		case !found:
			fmt.Fprintf(stderr, "Error from server (NotFound): jobsets.jobset.x-k8s.io %q not found\n", name)
		default:
			fmt.Fprintf(stdout, "jobset.jobset.x-k8s.io %q deleted\n", name)
			xpkPrint(stdout, "Task: `Delete Workload` terminated with code `0`")
			xpkPrint(stdout, "Exiting XPK cleanly")
			return 0
		}
		xpkPrint(stdout, "Task: `Delete Workload` terminated with code `1`")
		xpkPrint(stdout, "Delete Workload request returned ERROR 1")
		xpkPrint(stdout, "XPK failed, error code 1")
		return 1
	}
	// list
	status := o.str("--filter-by-status")
	if status == "" {
		status = "EVERYTHING"
	}
	xpkPrint(stdout, "Starting workload list")
	xpkPrint(stdout, "Task: `List Jobs with filter-by-status=%s` is implemented by `kubectl get workloads --ignore-not-found -o=jsonpath=...`, hiding output unless there is an error.", status)
	var table string
	if raw, ok := os.LookupEnv("FAKEXPK_LIST_OUTPUT"); ok {
		table = raw
	} else {
		rows, err := st.list(ctx)
		if err != nil {
			fmt.Fprintln(stderr, err)
			xpkPrint(stdout, "List Job request returned ERROR 1")
			xpkPrint(stdout, "XPK failed, error code 1")
			return 1
		}
		job := o.str("--filter-by-job")
		rows = slices.DeleteFunc(rows, func(r row) bool { return !keep(r, status, job) })
		table = render(rows)
	}
	xpkPrint(stdout, "Workload List Output:\n%s", table)
	xpkPrint(stdout, "See your workloads in Cloud Console: https://console.cloud.google.com/kubernetes/aiml/deployments/jobs?project=%s", project)
	xpkPrint(stdout, "Exiting XPK cleanly")
	return 0
}

// keep is xpk's _filter_workload.
func keep(r row, status, job string) bool {
	if job != "" && !strings.Contains(r.Name, job) {
		return false
	}
	running, _ := strconv.Atoi(r.Running)
	switch status {
	case "RUNNING":
		return (r.Status == "Admitted" || r.Status == "Evicted") && running > 0
	case "QUEUED":
		return slices.Contains([]string{"Admitted", "Evicted", "QuotaReserved"}, r.Status) && running == 0
	case "FINISHED":
		return r.Status == "Finished"
	case "FAILED":
		return r.Status == "Finished" && strings.Contains(r.Message, "failed")
	case "SUCCESSFUL":
		return r.Status == "Finished" && strings.Contains(r.Message, "finished")
	}
	return true
}

var headers = []string{"Jobset Name", "Created Time", "Priority", "TPU VMs Needed", "TPU VMs Running/Ran", "TPU VMs Done", "Status", "Status Message", "Status Time"}

// render is xpk's _render_workloads: nothing for no rows, else every
// column left-aligned to its widest cell, three spaces apart.
func render(rows []row) string {
	if len(rows) == 0 {
		return ""
	}
	cells := [][]string{headers}
	for _, r := range rows {
		cells = append(cells, []string{r.Name, r.Created, r.Priority, none(r.Needed), none(r.Running), none(r.Done), r.Status, r.Message, r.StatusTime})
	}
	widths := make([]int, len(headers))
	for _, c := range cells {
		for i, v := range c {
			widths[i] = max(widths[i], len([]rune(v)))
		}
	}
	lines := make([]string, len(cells))
	for j, c := range cells {
		parts := make([]string, len(c))
		for i, v := range c {
			parts[i] = v + strings.Repeat(" ", widths[i]-len([]rune(v)))
		}
		lines[j] = strings.Join(parts, "   ")
	}
	return strings.Join(lines, "\n")
}

func none(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// store holds workloads: on a cluster, or in a state file.
type store interface {
	exists(ctx context.Context, name string) (bool, error)
	create(ctx context.Context, o parsed) error
	remove(ctx context.Context, name string) (bool, error)
	list(ctx context.Context) ([]row, error)
}

func openStore() (store, error) {
	if kc := os.Getenv("FAKEXPK_KUBECONFIG"); kc != "" {
		return newKubeStore(kc)
	}
	path := os.Getenv("FAKEXPK_STATE")
	if path == "" {
		return nil, errors.New("fakexpk: set FAKEXPK_KUBECONFIG or FAKEXPK_STATE")
	}
	return fileStore(path), nil
}

// fileStore keeps rows by name in a JSON file. Tests run one xpk at a time
// per file, as xpk itself would be run against one cluster's state.
type fileStore string

func (f fileStore) read() (map[string]row, error) {
	m := map[string]row{}
	data, err := os.ReadFile(string(f))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return m, nil
	}
	return m, json.Unmarshal(data, &m)
}

func (f fileStore) write(m map[string]row) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := string(f) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, string(f))
}

func (f fileStore) exists(_ context.Context, name string) (bool, error) {
	m, err := f.read()
	_, ok := m[name]
	return ok, err
}

func (f fileStore) create(_ context.Context, o parsed) error {
	m, err := f.read()
	if err != nil {
		return err
	}
	name := o.str("--workload")
	now := time.Now().UTC().Format(time.RFC3339)
	m[name] = row{Name: name, Created: now, Priority: priorityOf(o), Needed: strconv.Itoa(vmsOf(o)),
		Status: "QuotaReserved", Message: "couldn't assign flavors to pod set slice-job: insufficient unused quota", StatusTime: now}
	return f.write(m)
}

func (f fileStore) remove(_ context.Context, name string) (bool, error) {
	m, err := f.read()
	if err != nil {
		return false, err
	}
	if _, ok := m[name]; !ok {
		return false, nil
	}
	delete(m, name)
	return true, f.write(m)
}

func (f fileStore) list(context.Context) ([]row, error) {
	m, err := f.read()
	if err != nil {
		return nil, err
	}
	out := make([]row, 0, len(m))
	for n, r := range m {
		r.Name = n
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.Created+a.Name, b.Created+b.Name) })
	return out, nil
}

func priorityOf(o parsed) string {
	if p := o.str("--priority"); p != "" {
		return p
	}
	return "medium"
}

// vmsOf is how many VMs (pods) the workload needs, as xpk's system
// characteristics count them: a TPU slice of one chip is one VM, larger
// ones have four chips per VM, times --num-slices; GPUs take --num-nodes.
func vmsOf(o parsed) int {
	slicesN := atoiOr(o.str("--num-slices"), 1)
	if t := o.str("--tpu-type"); t != "" {
		i := strings.Index(t, "-")
		if i < 0 {
			return slicesN
		}
		spec := t[i+1:]
		chips := 1
		if strings.Contains(spec, "x") {
			for _, d := range strings.Split(spec, "x") {
				chips *= atoiOr(d, 1)
			}
		} else {
			cores := atoiOr(spec, 1)
			perChip := 2
			if strings.HasPrefix(t, "v5litepod") || strings.HasPrefix(t, "v6e") {
				perChip = 1
			}
			chips = max(cores/perChip, 1)
		}
		if chips == 1 {
			return slicesN
		}
		return max(chips/4, 1) * slicesN
	}
	return atoiOr(o.str("--num-nodes"), 1)
}

func atoiOr(s string, d int) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return d
	}
	return n
}
