package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// kubeExec is falcon dev with a Kubernetes edge cluster whose kwok runs
// exec'd commands on this machine, and a running experiment of two ranks
// there: each rank's "container" is a directory of its own (work[rank])
// with FALCON_RANK and POD in its environment.
type kubeExec struct {
	c     *kubeenv.Cluster
	d     *dev
	id    string
	job   string
	pods  []string
	work  []string
	ranks int
}

func startKubeExec(t testing.TB, name string) *kubeExec {
	t.Helper()
	ctx := context.Background()
	c := kubeenv.Start(t, kubeenv.WithPodExec())
	if _, err := c.CreateNamespace(ctx, kubeNamespace); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddNodes(ctx, 1, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	d := startDev(t, "")
	f := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := os.WriteFile(f, fmt.Appendf(nil, "clusters:\n  %s:\n    provider: kubernetes\n    kubeconfig: %s\n    context: %s\n    default_namespace: %s\n",
		c.Name(), c.KubeconfigPath(), c.Context(), kubeNamespace), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := d.run("", "cluster", "apply", "-f", f); r.code != 0 {
		t.Fatalf("cluster apply: %d %s", r.code, r.stderr)
	}
	exp := d.create(fmt.Sprintf(`name: %s
cluster_name: %s
role_to_task_spec:
  main:
    command: python serve.py
    image: falcon.test/server:v1
    replica: 2
    envs: {FALCON_TEST_RUN_FOREVER: "true"}
`, name, c.Name()))
	k := &kubeExec{c: c, d: d, id: exp["id"].(string), job: jobsOf(exp)[0]["id"].(string), ranks: 2}
	d.waitFor(k.id, "Running", func(e map[string]any) bool { return e["status"] == "Running" })
	for rank := range k.ranks {
		pod := rankPod(t, c, k.job, rank)
		work := t.TempDir()
		if err := c.ServePodExec(ctx, kubeNamespace, pod, "task", work, map[string]string{"FALCON_RANK": strconv.Itoa(rank), "POD": pod}); err != nil {
			t.Fatal(err)
		}
		k.pods, k.work = append(k.pods, pod), append(k.work, work)
	}
	return k
}

// rankPod waits for the pod of a rank to be bound to a node.
func rankPod(t testing.TB, c *kubeenv.Cluster, jobID string, rank int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pods, err := c.Clientset().CoreV1().Pods(kubeNamespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: fmt.Sprintf("batch.kubernetes.io/job-name=%s,batch.kubernetes.io/job-completion-index=%d", jobID, rank)})
		if err == nil && len(pods.Items) > 0 && pods.Items[0].Spec.NodeName != "" && pods.Items[0].Status.Phase == "Running" {
			return pods.Items[0].Name
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running pod of rank %d of job %s: %v", rank, jobID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The whole path is real: the CLI's WebSocket to falcon dev's API server,
// which execs through the edge cluster's kube-apiserver (its streaming
// proxy to the node's kubelet endpoint, kwok's), which runs the command.
func TestKubernetesExecAndCp(t *testing.T) {
	k := startKubeExec(t, "kube-exec")
	d, id := k.d, k.id

	for _, tt := range []struct {
		name             string
		stdin            string
		args             []string
		code             int
		stdout, stderrIs string
	}{
		{name: "exit 0, stdout and stderr apart", args: []string{"--", "sh", "-c", "echo out; echo err >&2"}, stdout: "out\n", stderrIs: "err\n"},
		{name: "exit 3", args: []string{"--", "sh", "-c", "exit 3"}, code: 3},
		{name: "killed by SIGKILL", args: []string{"--", "sh", "-c", "kill -9 $$"}, code: 137},
		// kwok never closes a command's stdin (it copies into the pipe and
		// leaves it open), so the command reads what it needs, not to EOF.
		{name: "stdin", stdin: "to the pod\n", args: []string{"-i", "--", "sh", "-c", "head -n 1 | tr a-z A-Z"}, stdout: "TO THE POD\n"},
		// With -i: kwok's terminal needs a stdin (without one it crashes,
		// where a kubelet gives the command none). The terminal echoes
		// the input line. kwok closes the terminal as soon as the command
		// exits, racing its own copy of the last output to the stream
		// (kwok v0.8.0, execInContainerWithTTY), so the command stays a
		// moment after its output for kwok's copy, not for this test.
		{name: "a terminal", stdin: "ok\n", args: []string{"-it", "--", "sh", "-c", "read x; test -t 1 && echo tty $x; sleep 1"}, stdout: "ok\r\ntty ok\r\n"},
		{name: "rank 1", args: []string{"--rank", "1", "--", "sh", "-c", "echo $FALCON_RANK $POD; pwd"}, stdout: "1 " + k.pods[1] + "\n" + k.work[1] + "\n"},
		{name: "an unknown rank", args: []string{"--rank", "2", "--", "true"}, code: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := d.with(t).run(tt.stdin, append([]string{"exp", "exec", id}, tt.args...)...)
			if r.code != tt.code || (tt.code == 0 || tt.stdout != "") && r.stdout != tt.stdout || (tt.stderrIs != "" && r.stderr != tt.stderrIs) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q %q", r.code, r.stdout, r.stderr, tt.code, tt.stdout, tt.stderrIs)
			}
		})
	}

	// 100 MiB of stdout, byte for byte.
	const mib = 100
	h := sha256.New()
	r := d.runTo(h, "exp", "exec", id, "--", "sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' y", mib<<20))
	if want := sha256.Sum256(bytes.Repeat([]byte("y"), mib<<20)); r.code != 0 || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Errorf("%d MiB: exit %d, checksum differs (%s)", mib, r.code, r.stderr)
	}

	// cp both ways: a file (FALCON_CP_MIB, 16 by default) and a tree.
	local := t.TempDir()
	size := envMiB(t, "FALCON_CP_MIB", 16)
	big := filepath.Join(local, "weights.bin")
	writeRandom(t, big, size)
	tree := filepath.Join(local, "tree")
	for p, body := range map[string]string{"a.txt": "a\n", "sub/b.txt": "bee\n", "sub/deep/c.json": "{}", "sub/empty.txt": ""} {
		os.MkdirAll(filepath.Dir(filepath.Join(tree, p)), 0o755)
		writeFile(t, filepath.Join(tree, p), body)
	}
	os.MkdirAll(filepath.Join(tree, "emptydir"), 0o755)
	remote := k.work[1]
	for _, args := range [][]string{
		{big, id + ":" + remote + "/in/model/weights.bin"}, // parents created
		{tree, id + ":" + remote + "/in/tree"},
	} {
		if r := d.run("", append([]string{"exp", "cp", "--rank", "1"}, args...)...); r.code != 0 {
			t.Fatalf("cp %v: exit %d %s", args, r.code, r.stderr)
		}
	}
	sameFile(t, big, filepath.Join(remote, "in/model/weights.bin"))
	sameTree(t, tree, filepath.Join(remote, "in/tree"))
	back := t.TempDir()
	for _, args := range [][]string{
		{id + ":" + remote + "/in/model/weights.bin", back + "/weights.bin"},
		{id + ":" + remote + "/in/tree", back + "/tree"},
	} {
		if r := d.run("", append([]string{"exp", "cp", "--rank", "1"}, args...)...); r.code != 0 {
			t.Fatalf("cp %v: exit %d %s", args, r.code, r.stderr)
		}
	}
	sameFile(t, big, filepath.Join(back, "weights.bin"))
	sameTree(t, tree, filepath.Join(back, "tree"))
	if r := d.run("", "exp", "cp", id+":"+remote+"/no/such/file", back); r.code != 3 || !strings.Contains(r.stderr, "/no/such/file does not exist") {
		t.Errorf("cp of a missing remote path: exit %d %s; want 3 naming it", r.code, r.stderr)
	}

	// Once it has ended, exec says when and where the files are.
	if r := d.run("", "exp", "abort", id, "--yes"); r.code != 0 {
		t.Fatalf("abort: %d %s", r.code, r.stderr)
	}
	d.waitFor(id, "Aborted", func(e map[string]any) bool { return e["status"] == "Aborted" })
	if r := d.run("", "exp", "exec", id, "--", "true"); r.code != 4 || !strings.Contains(r.stderr, "ended Aborted at") || !strings.Contains(r.stderr, "falcon artifact get "+id) {
		t.Errorf("exec after the end: exit %d %s", r.code, r.stderr)
	}
}

func envMiB(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number of MiB", name, v)
	}
	return n
}

func writeRandom(t testing.TB, path string, mib int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	seed := uint64(0x9e3779b97f4a7c15)
	for range mib {
		for i := 0; i < len(buf); i += 8 {
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
			for j := range 8 {
				buf[i+j] = byte(seed >> (8 * j))
			}
		}
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
}

func sameFile(t testing.TB, a, b string) {
	t.Helper()
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ (%d and %d bytes; %v %v)", a, b, len(x), len(y), err1, err2)
	}
}

func sameTree(t testing.TB, a, b string) {
	t.Helper()
	list := func(root string) map[string]string {
		m := map[string]string{}
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if fi.IsDir() {
				m[rel] = "dir"
			} else {
				body, _ := os.ReadFile(p)
				m[rel] = fmt.Sprintf("%x", sha256.Sum256(body))
			}
			return nil
		})
		return m
	}
	x, y := list(a), list(b)
	if fmt.Sprint(x) != fmt.Sprint(y) {
		t.Errorf("trees differ:\n%s: %v\n%s: %v", a, x, b, y)
	}
}
