package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// Queueing across real edge clusters: fair order across actors, queue
// messages, independence of topologies and clusters, abort while waiting,
// spreading of unpinned jobs, and one edge down while the other works.
//
// Fairness needs several actors, and `falcon dev` (like `falcon server
// --auth none`) attributes every call to the OS user running it. So this
// suite runs Falcon as it is deployed: `falcon server --auth cloudflare`
// verifying tokens from a test Cloudflare Access issuer (authtest), and
// `falcon controller` beside it; each actor's CLI calls carry that actor's
// token in FALCON_TOKEN. The resource manager is the same code as dev's.
//
// A (cluster, topology) queue is held by a job that cannot be scheduled:
// the 2x2x1 nodes of an edge are cordoned, so the job holding the slot stays
// Dispatching; uncordoning one node at a time lets exactly one more job run,
// moving the queue one step.

const (
	carol = "carol@example.com"
	alice = "alice@example.com"
	bob   = "bob@example.com"
	ops   = "ops@example.com" // admin; the suite's default identity
)

// queueEdge is an edge (see edge) with five single-host 2x2x1 nodes, room
// for a held job and four behind it.
func queueEdge(t testing.TB) *kubeenv.Cluster {
	t.Helper()
	c := edge(t)
	taints := []corev1.Taint{{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	capacity := corev1.ResourceList{"google.com/tpu": resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("200"),
		corev1.ResourceMemory: resource.MustParse("800Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if _, err := c.AddNodes(context.Background(), 3, map[string]string{
		kubeenv.LabelGKETPUAccelerator: "tpu7x", kubeenv.LabelGKETPUTopology: "2x2x1",
	}, taints, capacity); err != nil {
		t.Fatal(err)
	}
	return c
}

// startAuthStack starts `falcon server` (SQLite, Cloudflare Access auth
// against iss, ops as admin) and `falcon controller`, and returns a dev
// view of the server. Its CLI calls carry FALCON_TOKEN from the
// environment, which the caller sets.
func startAuthStack(t *testing.T, iss *authtest.Issuer) *dev {
	t.Helper()
	dir := t.TempDir()
	secret := filepath.Join(dir, "controller-token")
	if err := os.WriteFile(secret, []byte("e2e-queue-controller-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &dev{t: t, dataDir: dir, http: freeAddr(t), grpc: freeAddr(t), stderr: &bytes.Buffer{}}
	start := func(name string, log *bytes.Buffer, args ...string) {
		cmd := exec.Command(falconBin, args...)
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("falcon %s log (tail):\n%s", name, tailLines(log.String(), 150))
			}
		})
	}
	start("server", d.stderr, "server", "--db-driver", "sqlite", "--db-dsn", "file:"+filepath.Join(dir, "falcon.db"), "--migrate",
		"--http-addr", d.http, "--grpc-addr", d.grpc, "--artifact-root", dir, "--log-dir", filepath.Join(dir, "logs"),
		"--auth", "cloudflare", "--cf-team-domain", iss.URL, "--cf-audience", authtest.Audience,
		"--admin-email", ops, "--controller-token-file", secret, "--log-level", "debug")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + d.http + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("falcon server did not come up:\n%s", d.stderr)
		}
	}
	start("controller", &bytes.Buffer{}, "controller", "--api-grpc", d.grpc, "--data-dir", filepath.Join(dir, "controller"),
		"--poll-interval", "2s", "--controller-token-file", secret, "--log-level", "debug")
	return d
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// actor runs CLI commands as one person: their token overrides the
// environment's (the last FALCON_TOKEN in a command's environment wins).
type actor struct {
	d     *dev
	email string
	token string
}

func (u actor) run(t testing.TB, args ...string) result {
	t.Helper()
	cmd := exec.Command(falconBin, args...)
	cmd.Env = append(os.Environ(), "FALCON_SERVER=http://"+u.d.http, "FALCON_TOKEN="+u.token)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("falcon %v: %v", args, err)
	}
	return r
}

// create creates an experiment as this actor and returns its JSON.
func (u actor) create(t testing.TB, manifest string) map[string]any {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	r := u.run(t, "exp", "create", "-f", f, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exp create as %s: exit %d\n%s\n%s", u.email, r.code, r.stdout, r.stderr)
	}
	var exp map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &exp); err != nil {
		t.Fatalf("exp create: %v\n%s", err, r.stdout)
	}
	if exp["creator"] != u.email {
		t.Fatalf("experiment created by %s records creator %v", u.email, exp["creator"])
	}
	return exp
}

func (u actor) abort(t testing.TB, id string) {
	t.Helper()
	if r := u.run(t, "exp", "abort", id, "--yes"); r.code != 0 {
		t.Fatalf("exp abort %s as %s: %d %s", id, u.email, r.code, r.stderr)
	}
}

// jobWatch records, in the order one edge's apiserver created them, the
// Falcon job IDs of every Kubernetes Job ever created in the jobs
// namespace, including any deleted again before a test could list it.
type jobWatch struct {
	mu    sync.Mutex
	order []string
}

func watchJobs(t testing.TB, c *kubeenv.Cluster) *jobWatch {
	t.Helper()
	w := &jobWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := informers.NewSharedInformerFactoryWithOptions(c.Clientset(), 0, informers.WithNamespace(kubeNamespace))
	inf := f.Batch().V1().Jobs().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			w.mu.Lock()
			defer w.mu.Unlock()
			if id := j.Labels["falcon.dev/job-id"]; !slices.Contains(w.order, id) {
				w.order = append(w.order, id)
			}
		}
	}}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("job watch did not sync")
	}
	return w
}

// created returns those of ids that ever had a Kubernetes Job, in creation order.
func (w *jobWatch) created(ids ...string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, id := range w.order {
		if slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

// cordon marks every node of topology topo on c unschedulable, or
// schedulable again.
func cordon(t testing.TB, c *kubeenv.Cluster, topo string, unschedulable bool) {
	t.Helper()
	for _, n := range topoNodes(t, c, topo) {
		setUnschedulable(t, c, n.Name, unschedulable)
	}
}

// uncordonOne makes one cordoned node of topology topo schedulable.
func uncordonOne(t testing.TB, c *kubeenv.Cluster, topo string) {
	t.Helper()
	for _, n := range topoNodes(t, c, topo) {
		if n.Spec.Unschedulable {
			setUnschedulable(t, c, n.Name, false)
			return
		}
	}
	t.Fatalf("no cordoned %s node left on %s", topo, c.Name())
}

func topoNodes(t testing.TB, c *kubeenv.Cluster, topo string) []corev1.Node {
	t.Helper()
	list, err := c.Clientset().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: kubeenv.LabelGKETPUTopology + "=" + topo})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

func setUnschedulable(t testing.TB, c *kubeenv.Cluster, node string, v bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v)
	if _, err := c.Clientset().CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jobsByExp lists every Falcon job, keyed by its experiment's name.
func jobsByExp(d *dev) map[string]map[string]any {
	d.t.Helper()
	out := map[string]map[string]any{}
	for _, it := range d.mustJSON("job", "list", "--limit", "1000")["items"].([]any) {
		j := it.(map[string]any)
		out[j["exp_name"].(string)] = j
	}
	return out
}

// waitJobs polls every job until cond holds, or fails after a minute
// naming what and cond's last complaint.
func waitJobs(d *dev, what string, cond func(jobs map[string]map[string]any) string) map[string]map[string]any {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var jobs map[string]map[string]any
	var why string
	for time.Now().Before(deadline) {
		jobs = jobsByExp(d)
		if why = cond(jobs); why == "" {
			return jobs
		}
		time.Sleep(150 * time.Millisecond)
	}
	d.t.Fatalf("never %s: %s", what, why)
	return nil
}

// waitsWith checks that the job named name waits with exactly message msg.
func waitsWith(jobs map[string]map[string]any, name, msg string) string {
	j := jobs[name]
	if j == nil {
		return name + " does not exist"
	}
	if j["status"] != "Pending" || j["reason"] != "Waiting" || j["message"] != msg {
		return fmt.Sprintf("%s is %v/%v %q, want Pending/Waiting %q", name, j["status"], j["reason"], j["message"], msg)
	}
	return ""
}

// nextAfter checks that the job named name was picked ahead on cluster,
// to be submitted the moment holder's pods run (Pending/Next): the front of
// a Kubernetes cluster's queue.
func nextAfter(jobs map[string]map[string]any, name, cluster, holder string) string {
	j := jobs[name]
	if j == nil {
		return name + " does not exist"
	}
	msg := "next in line on cluster " + cluster + ": submitted the moment " + holder + " runs"
	if j["status"] != "Pending" || j["reason"] != "Next" || j["message"] != msg || j["cluster_name"] != cluster {
		return fmt.Sprintf("%s is %v/%v %q on %v, want Pending/Next %q", name, j["status"], j["reason"], j["message"], j["cluster_name"], msg)
	}
	return ""
}

// holdsSlot checks that the job named name holds its queue's slot:
// Dispatching, its pods refused by the edge's scheduler.
func holdsSlot(jobs map[string]map[string]any, name string) string {
	j := jobs[name]
	if j == nil {
		return name + " does not exist"
	}
	if j["status"] != "Pending" || j["reason"] != "Dispatching" || !strings.Contains(fmt.Sprint(j["message"]), "unschedulable") {
		return fmt.Sprintf("%s is %v/%v %q, want Pending/Dispatching and unschedulable", name, j["status"], j["reason"], j["message"])
	}
	return ""
}

func hasStatus(jobs map[string]map[string]any, name, want string) string {
	if j := jobs[name]; j == nil || j["status"] != want {
		return fmt.Sprintf("%s is %v, want %s", name, jobs[name], want)
	}
	return ""
}

func firstOf(checks ...string) string {
	for _, c := range checks {
		if c != "" {
			return c
		}
	}
	return ""
}

func TestKubernetesQueues(t *testing.T) {
	begin := time.Now()
	a, b := queueEdge(t), queueEdge(t)
	watches := map[*kubeenv.Cluster]*jobWatch{a: watchJobs(t, a), b: watchJobs(t, b)}
	iss := authtest.NewIssuer(t)
	t.Setenv("FALCON_TOKEN", iss.Token(ops))
	d0 := startAuthStack(t, iss)
	applyClusters(t, d0, a, b)
	as := func(email string) actor { return actor{d: d0, email: email, token: iss.Token(email)} }
	t.Logf("two edges and falcon server+controller ready in %s", time.Since(begin).Round(time.Millisecond))
	pin := func(c *kubeenv.Cluster) string { return "cluster_name: " + c.Name() + "\n" }
	forever := map[string]string{"FALCON_TEST_RUN_FOREVER": "true"}
	quick := map[string]string{"FALCON_TEST_DURATION": "1s"}
	label := func(who, name string) string { return who + ": " + name + "/main" }

	var d *dev
	run := func(name string, f func(t *testing.T, created map[string]string)) {
		t.Run(name, func(t *testing.T) {
			d = d0.with(t)
			created := map[string]string{} // exp name -> exp ID
			defer func() {
				// Leave the shared edges as found: nodes schedulable,
				// nothing of this subtest still running.
				cordon(t, a, "2x2x1", false)
				cordon(t, b, "2x2x1", false)
				var live []string
				for _, id := range created {
					exp := d.mustJSON("exp", "get", id)
					if s := exp["status"]; s != "Succeeded" && s != "Failed" && s != "Aborted" {
						live = append(live, id)
					}
				}
				if len(live) > 0 {
					d.run("", append([]string{"exp", "abort", "--yes"}, live...)...)
					for _, id := range live {
						d.waitFor(id, "ended", func(e map[string]any) bool {
							s := e["status"]
							return s == "Succeeded" || s == "Failed" || s == "Aborted"
						})
					}
				}
			}()
			f(t, created)
		})
	}
	submit := func(t *testing.T, created map[string]string, who actor, manifest string) string {
		t.Helper()
		exp := who.create(t, manifest)
		created[exp["name"].(string)] = exp["id"].(string)
		return jobsOf(exp)[0]["id"].(string)
	}

	run("fair order across actors, with queue messages", func(t *testing.T, created map[string]string) {
		cordon(t, a, "2x2x1", true)
		hold := submit(t, created, as(carol), tpuManifest("f-hold", "2x2x1", 1, forever, pin(a)))
		waitJobs(d, "f-hold holding edge A's 2x2x1 slot", func(j map[string]map[string]any) string { return holdsSlot(j, "f-hold") })
		a1 := submit(t, created, as(alice), tpuManifest("f-a1", "2x2x1", 1, forever, pin(a)))
		a2 := submit(t, created, as(alice), tpuManifest("f-a2", "2x2x1", 1, forever, pin(a)))
		a3 := submit(t, created, as(alice), tpuManifest("f-a3", "2x2x1", 1, forever, pin(a)))
		b1 := submit(t, created, as(bob), tpuManifest("f-b1", "2x2x1", 1, forever, pin(a)))
		// carol got the last slot but waits for nothing: alice's earliest
		// goes first, then bob (alice steps aside), then alice's others.
		waitJobs(d, "queued fairly behind carol", func(j map[string]map[string]any) string {
			return firstOf(holdsSlot(j, "f-hold"),
				nextAfter(j, "f-a1", a.Name(), label(carol, "f-hold")),
				waitsWith(j, "f-b1", "queue position #2, 1 ahead: "+label(alice, "f-a1")),
				waitsWith(j, "f-a2", "queue position #3, 2 ahead: "+label(alice, "f-a1")+", "+label(bob, "f-b1")),
				waitsWith(j, "f-a3", "queue position #4, 3 ahead: "+label(alice, "f-a1")+", "+label(bob, "f-b1")+", "+label(alice, "f-a2")))
		})
		// One more schedulable node per step: the holder runs, the next
		// job takes the slot and is refused by the scheduler in turn.
		uncordonOne(t, a, "2x2x1")
		waitJobs(d, "the queue moving on to f-a1", func(j map[string]map[string]any) string {
			return firstOf(hasStatus(j, "f-hold", "Running"), holdsSlot(j, "f-a1"),
				nextAfter(j, "f-b1", a.Name(), label(alice, "f-a1")),
				waitsWith(j, "f-a2", "queue position #2, 1 ahead: "+label(bob, "f-b1")),
				waitsWith(j, "f-a3", "queue position #3, 2 ahead: "+label(bob, "f-b1")+", "+label(alice, "f-a2")))
		})
		uncordonOne(t, a, "2x2x1")
		waitJobs(d, "bob's job dispatched before alice's second", func(j map[string]map[string]any) string {
			return firstOf(hasStatus(j, "f-a1", "Running"), holdsSlot(j, "f-b1"),
				nextAfter(j, "f-a2", a.Name(), label(bob, "f-b1")),
				waitsWith(j, "f-a3", "queue position #2, 1 ahead: "+label(alice, "f-a2")))
		})
		uncordonOne(t, a, "2x2x1")
		uncordonOne(t, a, "2x2x1")
		uncordonOne(t, a, "2x2x1")
		waitJobs(d, "all running", func(j map[string]map[string]any) string {
			return firstOf(hasStatus(j, "f-b1", "Running"), hasStatus(j, "f-a2", "Running"), hasStatus(j, "f-a3", "Running"))
		})
		all := []string{hold, a1, b1, a2, a3}
		if got := watches[a].created(all...); !slices.Equal(got, all) {
			t.Errorf("edge A created Kubernetes Jobs in order %v, want %v (hold, a1, b1, a2, a3)", got, all)
		}
		if got := watches[b].created(all...); len(got) != 0 {
			t.Errorf("jobs pinned to edge A reached edge B: %v", got)
		}
		for name, id := range created {
			exp := d.mustJSON("exp", "get", id)
			if j := jobsOf(exp)[0]; exp["status"] != "Running" || j["cluster_name"] != a.Name() || kubeJobs(t, a, j["id"].(string)) != 1 {
				t.Errorf("%s: %v on %v", name, exp["status"], j["cluster_name"])
			}
		}
	})

	run("topologies and clusters do not block each other", func(t *testing.T, created map[string]string) {
		cordon(t, a, "2x2x1", true)
		submit(t, created, as(carol), tpuManifest("i-hold", "2x2x1", 1, forever, pin(a)))
		waitJobs(d, "i-hold holding edge A's 2x2x1 slot", func(j map[string]map[string]any) string { return holdsSlot(j, "i-hold") })
		behind := submit(t, created, as(alice), tpuManifest("i-behind", "2x2x1", 1, quick, pin(a)))
		other := submit(t, created, as(alice), tpuManifest("i-other-topo", "2x2x2", 2, quick, pin(a)))
		onB := submit(t, created, as(bob), tpuManifest("i-other-edge", "2x2x1", 1, quick, pin(b)))
		jobs := waitJobs(d, "the other topology and the other edge succeeding", func(j map[string]map[string]any) string {
			return firstOf(hasStatus(j, "i-other-topo", "Succeeded"), hasStatus(j, "i-other-edge", "Succeeded"))
		})
		// Meanwhile the blocked queue stayed blocked.
		if why := firstOf(holdsSlot(jobs, "i-hold"),
			nextAfter(jobs, "i-behind", a.Name(), label(carol, "i-hold"))); why != "" {
			t.Error(why)
		}
		if got := watches[a].created(other, onB, behind); !slices.Equal(got, []string{other}) {
			t.Errorf("edge A created Kubernetes Jobs for %v, want only the 2x2x2 job %s", got, other)
		}
		if got := watches[b].created(other, onB, behind); !slices.Equal(got, []string{onB}) {
			t.Errorf("edge B created Kubernetes Jobs for %v, want only %s", got, onB)
		}
	})

	run("unpinned jobs spread to the shorter queue", func(t *testing.T, created map[string]string) {
		// Both edges offer 2x2x1 and neither can run it: every job picked
		// keeps its queue busy, so each placement sees the queues' depths.
		cordon(t, a, "2x2x1", true)
		cordon(t, b, "2x2x1", true)
		var on []string
		for i, who := range []string{alice, bob} {
			name := fmt.Sprintf("s-%d", i+1)
			submit(t, created, as(who), tpuManifest(name, "2x2x1", 1, quick, ""))
			jobs := waitJobs(d, name+" picked on an edge", func(j map[string]map[string]any) string { return holdsSlot(j, name) })
			on = append(on, jobs[name]["cluster_name"].(string))
		}
		if on[0] == on[1] {
			t.Fatalf("with %s's 2x2x1 queue busy, the next unpinned job went there too", on[0])
		}
		// Both queues are one deep now: either will do, but the job must
		// wait in one of them rather than go unplaced.
		submit(t, created, as(carol), tpuManifest("s-3", "2x2x1", 1, quick, ""))
		jobs := waitJobs(d, "s-3 picked ahead behind s-1 or s-2", func(j map[string]map[string]any) string {
			if nextAfter(j, "s-3", on[0], label(alice, "s-1")) == "" || nextAfter(j, "s-3", on[1], label(bob, "s-2")) == "" {
				return ""
			}
			return fmt.Sprintf("s-3 is %v/%v %q, want next in line behind s-1 or s-2", j["s-3"]["status"], j["s-3"]["reason"], j["s-3"]["message"])
		})
		on = append(on, jobs["s-3"]["cluster_name"].(string))
		cordon(t, a, "2x2x1", false)
		cordon(t, b, "2x2x1", false)
		waitJobs(d, "all succeeded", func(j map[string]map[string]any) string {
			return firstOf(hasStatus(j, "s-1", "Succeeded"), hasStatus(j, "s-2", "Succeeded"), hasStatus(j, "s-3", "Succeeded"))
		})
		clusters := map[string]*kubeenv.Cluster{a.Name(): a, b.Name(): b}
		for i, name := range []string{"s-1", "s-2", "s-3"} {
			exp := d.mustJSON("exp", "get", created[name])
			j := jobsOf(exp)[0]
			if exp["status"] != "Succeeded" || j["cluster_name"] != on[i] {
				t.Errorf("%s: %v on %v, placed on %s", name, exp["status"], j["cluster_name"], on[i])
			}
			if got := watches[clusters[on[i]]].created(j["id"].(string)); len(got) != 1 {
				t.Errorf("%s never had a Kubernetes Job on %s", name, on[i])
			}
		}
	})

	run("abort while waiting never reaches an edge", func(t *testing.T, created map[string]string) {
		cordon(t, a, "2x2x1", true)
		submit(t, created, as(carol), tpuManifest("w-hold", "2x2x1", 1, forever, pin(a)))
		waitJobs(d, "w-hold holding edge A's 2x2x1 slot", func(j map[string]map[string]any) string { return holdsSlot(j, "w-hold") })
		gone := submit(t, created, as(alice), tpuManifest("w-aborted", "2x2x1", 1, quick, pin(a)))
		next := submit(t, created, as(bob), tpuManifest("w-next", "2x2x1", 1, quick, pin(a)))
		waitJobs(d, "both queued", func(j map[string]map[string]any) string {
			return firstOf(nextAfter(j, "w-aborted", a.Name(), label(carol, "w-hold")),
				waitsWith(j, "w-next", "queue position #2, 1 ahead: "+label(alice, "w-aborted")))
		})
		as(alice).abort(t, created["w-aborted"])
		exp := d.waitFor(created["w-aborted"], "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
		if j := jobsOf(exp)[0]; j["status"] != "Aborted" || j["dispatched_at"] != nil {
			t.Errorf("aborted waiting job: %v", j)
		}
		// The queue closes up behind it, then moves on once the slot frees.
		waitJobs(d, "w-next moving up", func(j map[string]map[string]any) string {
			return nextAfter(j, "w-next", a.Name(), label(carol, "w-hold"))
		})
		cordon(t, a, "2x2x1", false)
		d.waitFor(created["w-next"], "Succeeded", func(e map[string]any) bool { return e["status"] == "Succeeded" })
		if got := watches[a].created(next); len(got) != 1 {
			t.Errorf("the job behind the aborted one never reached edge A")
		}
		for c, w := range watches {
			if got := w.created(gone); len(got) != 0 || kubeJobs(t, c, gone) != 0 {
				t.Errorf("the job aborted while waiting got a Kubernetes Job on %s", c.Name())
			}
		}
		if exp := d.mustJSON("exp", "get", created["w-aborted"]); exp["status"] != "Aborted" {
			t.Errorf("aborted experiment is now %v", exp["status"])
		}
	})

	run("an edge down does not stall the other", func(t *testing.T, created map[string]string) {
		down := time.Now()
		b.StopAPIServer()
		restarted := false
		defer func() {
			if !restarted {
				b.StartAPIServer(context.Background())
			}
		}()
		toB := submit(t, created, as(alice), tpuManifest("o-edge-b", "2x2x1", 1, quick, pin(b)))
		queued := submit(t, created, as(alice), tpuManifest("o-edge-b-queued", "2x2x1", 1, quick, pin(b)))
		// Jobs for edge A are dispatched and finish while B is unreachable.
		var onA []string
		for i := range 3 {
			onA = append(onA, submit(t, created, as(bob), tpuManifest(fmt.Sprintf("o-edge-a-%d", i), "2x2x1", 1, quick, pin(a))))
		}
		jobs := waitJobs(d, "edge A's jobs succeeding", func(j map[string]map[string]any) string {
			return firstOf(hasStatus(j, "o-edge-a-0", "Succeeded"), hasStatus(j, "o-edge-a-1", "Succeeded"), hasStatus(j, "o-edge-a-2", "Succeeded"))
		})
		t.Logf("edge A's 3 jobs succeeded %s after edge B went down; o-edge-b: %v/%v %q", time.Since(down).Round(time.Millisecond),
			jobs["o-edge-b"]["status"], jobs["o-edge-b"]["reason"], jobs["o-edge-b"]["message"])
		// A job queued for the unreachable edge, never dispatched, is
		// aborted at once: there is nothing of it on the edge to stop.
		t.Run("abort of a job queued for it", func(t *testing.T) {
			d := d0.with(t)
			as(alice).abort(t, created["o-edge-b-queued"])
			for deadline := time.Now().Add(4 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				j := jobsByExp(d)["o-edge-b-queued"]
				if j["status"] == "Aborted" {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("aborting a job still queued for the unreachable edge: %v/%v %q after 4s", j["status"], j["reason"], j["message"])
					break
				}
			}
		})
		// Stay down past a few of the backend's backoff periods (1s, 2s,
		// 4s), not much longer: the edge's own controllers, scheduler and
		// kwok reconnect with client-go's backoff, which grows with the
		// outage and is what the job waits for once the edge is back.
		for time.Since(down) < 7*time.Second {
			j := jobsByExp(d)["o-edge-b"]
			if j["status"] != "Pending" {
				t.Fatalf("job for the unreachable edge went %v/%v: %v", j["status"], j["reason"], j["message"])
			}
			time.Sleep(500 * time.Millisecond)
		}
		// The job says why it waits.
		if j := jobsByExp(d)["o-edge-b"]; !strings.Contains(fmt.Sprint(j["message"]), "unreachable") || !strings.Contains(fmt.Sprint(j["message"]), b.Name()) {
			t.Errorf("job waiting for the unreachable edge %s says %v/%v %q", b.Name(), j["status"], j["reason"], j["message"])
		}
		if got := watches[a].created(onA...); len(got) != 3 {
			t.Errorf("edge A saw Kubernetes Jobs for %v, want all of %v", got, onA)
		}
		if err := b.StartAPIServer(context.Background()); err != nil {
			t.Fatal(err)
		}
		restarted = true
		up := time.Now()
		// Not d.waitFor's minute: see above on the edge's own reconnects.
		var exp map[string]any
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			exp = d.mustJSON("exp", "get", created["o-edge-b"])
			if s := exp["status"]; s == "Succeeded" || s == "Failed" || s == "Aborted" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job for the edge that came back never ended: %v", jobsOf(exp)[0])
			}
		}
		t.Logf("o-edge-b ended %v %s after edge B came back", exp["status"], time.Since(up).Round(time.Millisecond))
		if list, err := b.Clientset().BatchV1().Jobs(kubeNamespace).List(context.Background(),
			metav1.ListOptions{LabelSelector: "falcon.dev/job-id=" + toB}); err == nil && len(list.Items) == 1 {
			kj := list.Items[0]
			done := "never"
			if ct := kj.Status.CompletionTime; ct != nil {
				done = ct.Time.Sub(up).Round(time.Second).String()
			}
			t.Logf("its Kubernetes Job was created %s and complete %s after edge B came back (whole seconds)",
				kj.CreationTimestamp.Time.Sub(up).Round(time.Second), done)
		}
		if j := jobsOf(exp)[0]; exp["status"] != "Succeeded" || j["cluster_name"] != b.Name() {
			t.Fatalf("job for the edge that came back: %v on %v: %v", exp["status"], j["cluster_name"], j)
		}
		if n := kubeJobs(t, b, toB); n != 1 {
			t.Errorf("%d Kubernetes Jobs on edge B for one Falcon job", n)
		}
		if exp := d.waitFor(created["o-edge-b-queued"], "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" }); len(watches[b].created(queued)) != 0 {
			t.Errorf("the job aborted while queued for edge B reached it: %v", jobsOf(exp)[0])
		}
	})
}
