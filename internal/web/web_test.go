package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/web"
)

var alice = auth.Principal{UserID: "local:alice", Email: "alice@localhost"}

// start serves a real API server (SQLite, loopback gRPC and HTTP) whose
// every call is alice's; the dashboard is its /ui/.
func start(t *testing.T) *apitest.Env {
	t.Helper()
	return apitest.Start(t, map[string]string{"local": "local", "tpu-east": "local"},
		apiserver.WithAuthenticator(auth.Local{P: alice}))
}

// get fetches a page and returns its status and body.
func get(t *testing.T, base, path string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK && !strings.HasPrefix(ct, "text/html") {
		t.Errorf("GET %s: %d answered as %q; want an HTML page", path, resp.StatusCode, ct)
	}
	return resp.StatusCode, string(b)
}

var (
	rowRE  = regexp.MustCompile(`<tr data-exp-id="(exp-[a-z0-9]{10})"`)
	nextRE = regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
)

// rows are the experiments a list page shows, in order.
func rows(body string) []string {
	var out []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func nextLink(body string) string {
	m := nextRE.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// seed writes experiments straight into the store, with creators and
// statuses the local authenticator could not give them, newest last.
func seed(t *testing.T, a *apitest.Env, exps ...*store.Experiment) map[string]string {
	t.Helper()
	byName := map[string]string{}
	t0 := time.Now().Add(-time.Hour).UTC()
	err := sqlstore.SeedExps(context.Background(), a.Store, len(exps), func(i int) *store.Experiment {
		e := exps[i]
		e.ID = ids.New(ids.Experiment)
		e.CreatedAt = t0.Add(time.Duration(i) * time.Second)
		e.UpdatedAt = e.CreatedAt
		if e.ClusterName == "" {
			e.ClusterName = "local"
		}
		if e.Status == "" {
			e.Status = lifecycle.Succeeded
		}
		if e.Creator == "" {
			e.Creator, e.CreatorID = "alice@localhost", "local:alice"
		}
		e.RoleToTaskSpec = map[string]store.TaskSpec{"w": {Command: "true", Replica: 1}}
		byName[e.Name] = e.ID
		return e
	})
	if err != nil {
		t.Fatal(err)
	}
	return byName
}

func TestListFilters(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	ids := seed(t, a,
		&store.Experiment{Name: "llama-train", ExpType: "training", Tags: []string{"llama", "v7x"}},
		&store.Experiment{Name: "llama-bench", ExpType: "benchmark", Tags: []string{"llama"}, Status: lifecycle.Failed},
		&store.Experiment{Name: "qwen-train", ExpType: "training", Creator: "bob@example.com", CreatorID: "u-bob", ClusterName: "tpu-east"},
		&store.Experiment{Name: "qwen-profile", ExpType: "profiling", Tags: []string{"v7x"}, Status: lifecycle.Running, ClusterName: "tpu-east"},
	)
	for _, tc := range []struct {
		name, query string
		want        []string // newest first
	}{
		{"everything", "", []string{"qwen-profile", "qwen-train", "llama-bench", "llama-train"}},
		{"status", "status=Failed", []string{"llama-bench"}},
		{"status as scripts write it", "status=running", []string{"qwen-profile"}},
		{"creator", "creator=bob@example.com", []string{"qwen-train"}},
		{"creator me: the viewer's own", "creator=me", []string{"qwen-profile", "llama-bench", "llama-train"}},
		{"cluster", "cluster=tpu-east", []string{"qwen-profile", "qwen-train"}},
		{"type", "type=training", []string{"qwen-train", "llama-train"}},
		{"tag", "tag=v7x", []string{"qwen-profile", "llama-train"}},
		{"name, any case", "name=LLAMA", []string{"llama-bench", "llama-train"}},
		{"name and tag", "name=llama&tag=v7x", []string{"llama-train"}},
		{"server and page filters", "cluster=tpu-east&name=train", []string{"qwen-train"}},
		{"nothing matches", "name=mistral", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, base, "/ui/?"+tc.query, nil)
			if code != http.StatusOK {
				t.Fatalf("%d: %s", code, body)
			}
			var want []string
			for _, n := range tc.want {
				want = append(want, ids[n])
			}
			if diff := cmp.Diff(want, rows(body)); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			if tc.want == nil && !strings.Contains(body, "No experiments match.") {
				t.Error("an empty list does not say so")
			}
		})
	}
}

// Paging never shows a row twice or skips one, including when a page
// fills in the middle of the server's page (name and tag are matched by
// the dashboard, and the Next link resumes inside that page).
func TestListPages(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	var exps []*store.Experiment
	for i := range 23 {
		tags := []string{}
		if i%3 == 0 {
			tags = []string{"every-third"}
		}
		exps = append(exps, &store.Experiment{Name: fmt.Sprintf("run-%02d", i), ExpType: "training", Tags: tags})
	}
	byName := seed(t, a, exps...)
	for _, tc := range []struct {
		name, query string
		match       func(i int) bool
	}{
		{"server pages", "limit=5", func(int) bool { return true }},
		{"name", "limit=4&name=run-1", func(i int) bool { return i >= 10 && i < 20 }},
		{"tag, the server's filter", "limit=3&tag=every-third", func(i int) bool { return i%3 == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for i := 22; i >= 0; i-- {
				if tc.match(i) {
					want = append(want, byName[fmt.Sprintf("run-%02d", i)])
				}
			}
			var got []string
			path := "/ui/?" + tc.query
			for pages := 0; path != ""; pages++ {
				if pages > 30 {
					t.Fatal("more than 30 pages")
				}
				code, body := get(t, base, path, nil)
				if code != http.StatusOK {
					t.Fatalf("GET %s: %d", path, code)
				}
				r := rows(body)
				if next := nextLink(body); next != "" && len(r) == 0 {
					t.Fatalf("GET %s: an empty page links to another", path)
				}
				got = append(got, r...)
				path = nextLink(body)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rows over all pages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknownAndBadInput(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	real := a.Create(t, "real", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}}).GetId()
	for _, tc := range []struct {
		name, path string
		code       int
		says       string
	}{
		{"unknown experiment", "/ui/experiments/exp-0000000000", 404, "not found"},
		{"not an ID", "/ui/experiments/hello", 404, "does not look like an ID"},
		{"unknown page", "/ui/nothing-here", 404, "Nothing is served at /ui/nothing-here"},
		{"unknown asset", "/ui/assets/nope.js", 404, ""},
		{"live of an unknown experiment", "/ui/experiments/exp-0000000000/live", 404, "not found"},
		{"compare with an unknown one", "/ui/compare?id=" + real + "&id=exp-0000000000", 404, "not found"},
		{"unknown cluster", "/ui/clusters?cluster=nowhere", 404, "nowhere"},
		{"limit zero", "/ui/?limit=0", 400, "limit: &#34;0&#34; must be a number from 1 to 200"},
		{"limit too large", "/ui/?limit=5000", 400, "limit:"},
		{"status unknown", "/ui/?status=finished", 400, "status: &#34;finished&#34; is not a"},
		{"skip negative", "/ui/?skip=-1", 400, "skip:"},
		{"tail zero", "/ui/experiments/" + real + "?tail=0", 400, "tail:"},
		{"rank negative", "/ui/experiments/" + real + "?rank=-1", 400, "rank:"},
		{"rank past the replicas", "/ui/experiments/" + real + "?rank=7", 200, "no selected role has rank 7"},
		{"compare one", "/ui/compare?id=" + real, 400, "id: give at least two experiments"},
		{"compare one twice", "/ui/compare?id=" + real + "&id=" + real, 400, "given twice"},
		{"compare six", "/ui/compare?id=" + strings.Repeat(real+"&id=", 5) + real, 400, "id:"},
		{"live with a bad ID", "/ui/live?id=nope", 400, "id: &#34;nope&#34; is not an experiment ID"},
		{"live after a bad seq", "/ui/experiments/" + real + "/live?after=x", 400, "after:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, base, tc.path, nil)
			if code != tc.code || !strings.Contains(body, tc.says) {
				t.Errorf("GET %s: %d, want %d saying %q:\n%s", tc.path, code, tc.code, tc.says, body)
			}
		})
	}
	req, _ := http.NewRequest("POST", base+"/ui/", strings.NewReader("x"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want 405: the dashboard only reads", resp.StatusCode)
	}
}

// writeRun makes what a finished job leaves on falcon dev: a log per rank
// and files (metrics.jsonl among them) in its artifact.
func writeRun(t *testing.T, a *apitest.Env, exp *falconv1.Experiment, lines []string, metrics string) {
	t.Helper()
	j := exp.GetJobs()[0]
	dir := filepath.Join(a.Dir, "logs", j.GetId())
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, j.GetId()+"-0.log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	art := strings.TrimPrefix(exp.GetArtifactPath(), "file://")
	must(t, os.MkdirAll(filepath.Join(art, "out dir"), 0o755))
	must(t, os.WriteFile(filepath.Join(art, "out dir", "a #1.txt"), []byte("hello"), 0o644))
	must(t, os.WriteFile(filepath.Join(art, "metrics.jsonl"), []byte(metrics), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// finish moves the experiment's job and itself through Running to
// Succeeded, as the controllers would.
func finish(t *testing.T, a *apitest.Env, exp *falconv1.Experiment) {
	t.Helper()
	ctx := context.Background()
	j := exp.GetJobs()[0]
	for _, st := range []lifecycle.Status{lifecycle.Running, lifecycle.Succeeded} {
		cur := a.Job(t, j.GetId())
		if _, err := a.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: cur.GetStatus(), Status: string(st), Message: "job " + string(st)}); err != nil {
			t.Fatal(err)
		}
	}
	// The job's writes carried the experiment along.
	if got := a.Exp(t, exp.GetId()).GetStatus(); got != string(lifecycle.Succeeded) {
		t.Fatalf("experiment %s after its job succeeded", got)
	}
}

func TestExperimentPage(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	exp := a.Create(t, "page", map[string]*falconv1.TaskSpec{"worker": {Command: "train", Replica: 2}})
	writeRun(t, a, exp, []string{"step 1 <ok>", "step 2 done"}, `{"step": 1, "step_time": 0.5}`+"\n"+`{"step": 2, "step_time": 0.4}`+"\n")
	finish(t, a, exp)

	code, body := get(t, base, "/ui/experiments/"+exp.GetId(), nil)
	if code != http.StatusOK {
		t.Fatalf("%d:\n%s", code, body)
	}
	file := "/v1/experiments/" + exp.GetId() + "/files/out%20dir/a%20%231.txt"
	for what, want := range map[string]string{
		"the name":                        "<h1>page ",
		"the job":                         `data-job-id="` + exp.GetJobs()[0].GetId() + `"`,
		"the status":                      `st-succeeded`,
		"an event of the history":         `<td class="mono">job ` + exp.GetJobs()[0].GetId() + `</td><td><span class="status st-running"`,
		"a log line, escaped":             "step 1 &lt;ok&gt;",
		"the rank of a line":              `<span class="src">worker/0</span>`,
		"a download link, escaped":        `href="` + file + `" download`,
		"the metric's summary":            "<td>step_time</td><td>2</td>",
		"a chart":                         `<svg class="chart"`,
		"the chart's readout data":        `"points":[[1,0.5],[2,0.4]]`,
		"the ranks to choose from":        "<option>1</option>",
		"the seq the page rendered up to": `data-last-seq="`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s (%q)", what, want)
		}
	}
	// The link serves the file's bytes through the API's file route.
	if code, b := get(t, base, file, nil); code != http.StatusOK || b != "hello" {
		t.Errorf("GET %s: %d %q; want the file", file, code, b)
	}
	// An experiment that has not run yet still has a page: its parts say
	// why they are empty.
	fresh := a.Create(t, "fresh", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
	if code, body := get(t, base, "/ui/experiments/"+fresh.GetId(), nil); code != http.StatusOK || !strings.Contains(body, "No metrics reported") {
		t.Errorf("a fresh experiment: %d:\n%s", code, body)
	}
}

func TestComparePage(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	var got []string
	for i := range 3 {
		// Configs differ (cfg-cmp-0, -1, -2); step_time grows by 25% a run.
		exp := a.Create(t, fmt.Sprintf("cmp-%d", i), map[string]*falconv1.TaskSpec{"w": {Command: "train", Replica: 1}})
		var m strings.Builder
		for s := range 40 {
			fmt.Fprintf(&m, `{"step": %d, "step_time": %g, "loss": %g}`+"\n", s, 0.4+float64(i)*0.1+float64(s%3)*0.001, 1/float64(s+1))
		}
		writeRun(t, a, exp, []string{"ok"}, m.String())
		finish(t, a, exp)
		got = append(got, exp.GetId())
	}
	code, body := get(t, base, "/ui/compare?id="+got[0]+"&id="+got[1]+"&id="+got[2], nil)
	if code != http.StatusOK {
		t.Fatalf("%d:\n%s", code, body)
	}
	for what, want := range map[string]string{
		"the differing config": "cfg-cmp-0",
		"each experiment":      got[2],
		"a chart per metric":   "<figcaption>step_time</figcaption>",
		"three lines":          `class="line s2"`,
		"a verdict":            "regression",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the comparison lacks %s (%q)", what, want)
		}
	}
}

func TestClustersPage(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	ctx := context.Background()
	tpu := map[string]*falconv1.TaskSpec{"w": {Command: "train", Replica: 2, DeviceType: "v7x", DeviceTopo: "2x2x2", DeviceCount: 8}}
	var jobs []*falconv1.Job
	for i := range 4 {
		exp, err := a.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: fmt.Sprintf("q-%d", i), ClusterName: "tpu-east", RoleToTaskSpec: tpu}})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, exp.GetJobs()[0])
	}
	// What the resource manager writes: job 0 acquires, 3 waits first, 1
	// second, 2 has no position yet.
	set := func(j *falconv1.Job, reason, msg string) {
		if _, err := a.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: "Pending", Status: "Pending", Reason: reason, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	set(jobs[0], string(lifecycle.ReasonProvisioning), "creating node pool fp-abc")
	set(jobs[3], string(lifecycle.ReasonWaiting), "queue position #1, next in line, waiting for alice: q-0 to finish acquiring resources")
	set(jobs[1], string(lifecycle.ReasonWaiting), "queue position #2, 1 ahead: alice: q-3")
	clusters := falconv1.NewClusterServiceClient(a.Conn)
	now := time.Now()
	_, err := clusters.ReportClusterStatus(ctx, &falconv1.ReportClusterStatusRequest{Status: &falconv1.ClusterStatus{
		ClusterName: "tpu-east", ReportedAt: timestamp(now),
		Reservation: &falconv1.ReservationCapacity{Name: "res-v7x", Count: 16, InUse: 4, Free: 12},
		NodePools: []*falconv1.NodePoolStatus{
			{Name: "fp-abc", AcceleratorType: "tpu7x", Topology: "2x2x2", Nodes: 2, Status: "PROVISIONING", SupplyMode: "reservation", OwnerJobId: jobs[0].GetId(), CreatedAt: timestamp(now)},
			{Name: "fp-idle", AcceleratorType: "tpu7x", Topology: "2x2x1", Nodes: 1, Status: "RUNNING", SupplyMode: "flex-start", IdleSince: timestamp(now.Add(-7 * time.Minute)), CreatedAt: timestamp(now.Add(-time.Hour))},
		},
		Queues: []*falconv1.QueueStatus{{Topology: "v7x:2x2x2", AcceleratorTypes: []string{"v7x"}, Waiting: 3, AcquiringJobId: jobs[0].GetId()}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clusters.ReportClusterProbes(ctx, &falconv1.ReportClusterProbesRequest{Items: []*falconv1.ClusterProbe{
		{Cluster: "tpu-east", Reachable: true, QueueDepth: proto.Int32(3), RunningCount: proto.Int32(0), ProbedAt: timestamp(now)},
	}}); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, base, "/ui/clusters", nil)
	if code != http.StatusOK {
		t.Fatalf("%d:\n%s", code, body)
	}
	for what, want := range map[string]string{
		"the last probe":        "reachable</span> · 3 workloads waiting · 0 running",
		"the reservation left":  "<b>12</b> of 16 nodes free",
		"the pool's owner":      `<td class="mono">` + jobs[0].GetId() + `</td>`,
		"the idle pool's time":  `<td class="mono">idle</td><td>7m</td>`,
		"the queue":             "<td>v7x:2x2x2</td>",
		"the acquiring job":     "Provisioning",
		"the local cluster too": `id="cluster-local"`,
		"no report for it":      "No report from a controller yet.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s (%q)", what, want)
		}
	}
	// Waiting jobs in queue order, positions first, then the one without.
	sec := body[strings.Index(body, `class="list waiting"`):]
	sec = sec[:strings.Index(sec, "</table>")]
	var order []string
	for _, m := range regexp.MustCompile(`data-job-id="(job-[a-z0-9]{10})"><td>([^<]*)</td>`).FindAllStringSubmatch(sec, -1) {
		order = append(order, m[2]+" "+m[1])
	}
	want := []string{"#1 " + jobs[3].GetId(), "#2 " + jobs[1].GetId(), "– " + jobs[2].GetId()}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("waiting jobs (-want +got):\n%s", diff)
	}
	if code, body := get(t, base, "/ui/clusters?cluster=local", nil); code != http.StatusOK || strings.Contains(body, "tpu-east") {
		t.Errorf("one cluster: %d, shows another: %v", code, strings.Contains(body, "tpu-east"))
	}
}

// event is one server-sent event.
type event struct{ name, id, data string }

// events reads a stream's events onto a channel until it ends.
func events(t *testing.T, url string, header http.Header) (<-chan event, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan event, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var e event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.name != "" {
					ch <- e
				}
				e = event{}
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				e.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return ch, resp
}

// next waits for an event that contains want.
func next(t *testing.T, ch <-chan event, want string) event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before an event with %q", want)
			}
			if strings.Contains(e.name+" "+e.data, want) {
				return e
			}
		case <-timeout:
			t.Fatalf("no event with %q within 20s", want)
		}
	}
}

func setExpStatus(t *testing.T, a *apitest.Env, id string, from, to lifecycle.Status) {
	t.Helper()
	ctl := falconv1.NewExperimentServiceClient(a.Conn)
	if _, err := ctl.UpdateExpStatus(context.Background(), &falconv1.UpdateExpStatusRequest{Id: id, ExpectedStatus: string(from), Status: string(to), Message: "now " + string(to)}); err != nil {
		t.Fatal(err)
	}
}

func TestLiveList(t *testing.T) {
	a := start(t)
	exp := a.Create(t, "live", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
	ended := seed(t, a, &store.Experiment{Name: "done"})["done"]
	ch, resp := events(t, "http://"+a.HTTPAddr+"/ui/live?id="+exp.GetId()+":"+fmt.Sprint(exp.GetVersion())+"&id="+ended+":1", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live list: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	setExpStatus(t, a, exp.GetId(), lifecycle.Created, lifecycle.Running)
	next(t, ch, `"status":"Running"`)
	setExpStatus(t, a, exp.GetId(), lifecycle.Running, lifecycle.Failed)
	if e := next(t, ch, `"status":"Failed"`); !strings.Contains(e.data, `"terminal":true`) {
		t.Errorf("the end is not marked terminal: %s", e.data)
	}
	next(t, ch, "end")
}

// Without the change feed (another replica wrote the change), the list
// still sees it by its poll.
func TestLiveListPollsWithoutTheFeed(t *testing.T) {
	a := start(t)
	exp := a.Create(t, "polled", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
	h := web.New(a.UserConn, func(r *http.Request) context.Context { return r.Context() }, web.WithPoll(50*time.Millisecond))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ch, _ := events(t, srv.URL+"/ui/live?id="+exp.GetId()+":"+fmt.Sprint(exp.GetVersion()), nil)
	setExpStatus(t, a, exp.GetId(), lifecycle.Created, lifecycle.Running)
	next(t, ch, `"status":"Running"`)
}

func TestLiveExperiment(t *testing.T) {
	a := start(t)
	exp := a.Create(t, "watched", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
	_, body := get(t, "http://"+a.HTTPAddr, "/ui/experiments/"+exp.GetId(), nil)
	seq := regexp.MustCompile(`data-last-seq="(\d+)"`).FindStringSubmatch(body)
	if seq == nil {
		t.Fatal("the page names no last seq")
	}
	url := "http://" + a.HTTPAddr + "/ui/experiments/" + exp.GetId() + "/live?after=" + seq[1]
	ch, _ := events(t, url, nil)
	setExpStatus(t, a, exp.GetId(), lifecycle.Created, lifecycle.Running)
	first := next(t, ch, `"status":"Running"`)
	if first.id == "" || first.id == seq[1] {
		t.Errorf("event id %q: want the seq after the page's %s", first.id, seq[1])
	}
	// A browser reconnecting with Last-Event-ID gets only what came after.
	again, _ := events(t, "http://"+a.HTTPAddr+"/ui/experiments/"+exp.GetId()+"/live", http.Header{"Last-Event-ID": {first.id}})
	setExpStatus(t, a, exp.GetId(), lifecycle.Running, lifecycle.Aborting)
	if e := next(t, again, "change"); !strings.Contains(e.data, `"status":"Aborting"`) {
		t.Errorf("after Last-Event-ID %s the first event is %s; want the abort", first.id, e.data)
	}
}

// The dashboard is behind the API's authentication: without a valid
// Cloudflare Access token (the cookie a browser holds, or the header the
// edge sets) a page shows nothing the API would refuse.
func TestPagesNeedWhatTheAPINeeds(t *testing.T) {
	iss := authtest.NewIssuer(t)
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
	if err != nil {
		t.Fatal(err)
	}
	a := apitest.StartWith(t, apitest.Options{Clusters: map[string]string{"local": "local"},
		Server: []apiserver.Option{apiserver.WithAuthenticator(cf)}})
	base := "http://" + a.HTTPAddr
	secret := seed(t, a, &store.Experiment{Name: "secret-run", Creator: "a@example.com", CreatorID: "u-a"})["secret-run"]
	good := iss.Token("b@example.com")
	refused := authtest.RefusedTokens(t, iss)

	paths := []string{"/ui/", "/ui/experiments/" + secret, "/ui/clusters", "/ui/compare?id=" + secret + "&id=exp-0000000000", "/ui/live?id=" + secret, "/ui/experiments/" + secret + "/live"}
	for _, p := range paths {
		t.Run("none"+p, func(t *testing.T) {
			code, body := get(t, base, p, nil)
			if code != http.StatusUnauthorized || strings.Contains(body, "secret-run") || !strings.Contains(body, "Sign in required") {
				t.Errorf("GET %s without a token: %d:\n%s", p, code, body)
			}
		})
	}
	for _, r := range refused {
		t.Run("refused "+r.Name, func(t *testing.T) {
			code, body := get(t, base, "/ui/experiments/"+secret, http.Header{"Cookie": {auth.AuthCookie + "=" + r.Token}})
			if code != http.StatusUnauthorized || strings.Contains(body, "secret-run") {
				t.Errorf("%d:\n%s", code, body)
			}
		})
	}
	for name, h := range map[string]http.Header{
		"cookie":         {"Cookie": {"other=1; " + auth.AuthCookie + "=" + good}},
		"edge assertion": {auth.AssertionHeader: {good}},
		"bearer":         {"Authorization": {"Bearer " + good}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, p := range []string{"/ui/", "/ui/experiments/" + secret} {
				if code, body := get(t, base, p, h); code != http.StatusOK || !strings.Contains(body, "secret-run") {
					t.Errorf("GET %s: %d:\n%s", p, code, body)
				}
			}
		})
	}
	// Assets carry no data and are served to anyone, as the login page is.
	if code, _ := get(t, base, "/ui/assets/ui.css", nil); code != http.StatusOK {
		t.Errorf("ui.css without a token: %d", code)
	}
}

func TestAssetsAreSmallAndStayPut(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	_, body := get(t, base, "/ui/", nil)
	total := 0
	for name, n := range web.AssetSizes() {
		total += n
		m := regexp.MustCompile(`/ui/assets/` + regexp.QuoteMeta(name) + `\?v=[0-9a-f]{12}`).FindString(body)
		if m == "" {
			t.Errorf("the page does not link %s with its version", name)
			continue
		}
		resp, err := http.Get(base + m)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q; a versioned asset is cached for good", name, cc)
		}
	}
	// The budget of the whole dashboard's code and style, uncompressed.
	if total > 32<<10 {
		t.Errorf("assets total %d bytes; the budget is 32 KiB", total)
	}
	resp, err := http.Get(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q: scripts from elsewhere would run", csp)
	}
}

func timestamp(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// A name found nowhere in the newest 2,000 experiments does not make one
// page read them all: the page says where it stopped and the next goes on.
func TestListScanStopsAtItsBudget(t *testing.T) {
	a := start(t)
	base := "http://" + a.HTTPAddr
	var exps []*store.Experiment
	for i := range 2600 {
		name := fmt.Sprintf("hay-%04d", i)
		if i == 0 || i == 700 {
			name = fmt.Sprintf("needle-%04d", i)
		}
		exps = append(exps, &store.Experiment{Name: name, ExpType: "training"})
	}
	byName := seed(t, a, exps...)
	code, body := get(t, base, "/ui/?name=needle&limit=5", nil)
	if code != http.StatusOK {
		t.Fatalf("%d", code)
	}
	// needle-0700 is 1,900th newest, inside the budget; needle-0000 is not.
	if diff := cmp.Diff([]string{byName["needle-0700"]}, rows(body)); diff != "" {
		t.Errorf("first page (-want +got):\n%s", diff)
	}
	if !strings.Contains(body, "Read 2000 experiments") {
		t.Errorf("the page does not say that it stopped after 2,000:\n%s", body)
	}
	code, body = get(t, base, nextLink(body), nil)
	if code != http.StatusOK {
		t.Fatalf("%d", code)
	}
	if diff := cmp.Diff([]string{byName["needle-0000"]}, rows(body)); diff != "" {
		t.Errorf("second page (-want +got):\n%s", diff)
	}
	if nextLink(body) != "" {
		t.Error("the list's end links to another page")
	}
}

// Stopping the server ends the streams at once, instead of leaving its
// graceful shutdown to wait for them.
func TestStreamsEndWithTheServer(t *testing.T) {
	a := start(t)
	exp := a.Create(t, "open", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
	life, stop := context.WithCancel(context.Background())
	srv := httptest.NewServer(web.New(a.UserConn, func(r *http.Request) context.Context { return r.Context() }, web.WithLifetime(life)))
	t.Cleanup(srv.Close)
	list, _ := events(t, srv.URL+"/ui/live?id="+exp.GetId()+":"+fmt.Sprint(exp.GetVersion()), nil)
	one, _ := events(t, srv.URL+"/ui/experiments/"+exp.GetId()+"/live", nil)
	next(t, one, "change") // the history so far: the stream is open
	stop()
	for name, ch := range map[string]<-chan event{"list": list, "experiment": one} {
		timeout := time.After(5 * time.Second)
	drain:
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					break drain
				}
			case <-timeout:
				t.Fatalf("the %s stream is still open 5 s after the server stopped", name)
			}
		}
	}
}
