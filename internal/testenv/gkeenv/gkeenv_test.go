package gkeenv_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	container "google.golang.org/api/container/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/falconhq/falcon/internal/testenv/fakegke"
	"github.com/falconhq/falcon/internal/testenv/gkeenv"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

const (
	project  = "falcon-test"
	location = "us-central1"
	pool     = "falcon-e2e"
)

// TestJoin drives one pool through the path Falcon's GKE backend takes:
// connect with clusters.get's endpoint and CA and an OAuth2 token, create a
// v5p pool through the real client library, run a TPU pod on its nodes,
// delete the pool and see the nodes and the pod go.
func TestJoin(t *testing.T) {
	kc := kubeenv.Start(t)
	srv := fakegke.New(fakegke.WithLatency(300*time.Millisecond, 300*time.Millisecond))
	t.Cleanup(srv.Close)
	c := gkeenv.Join(t, srv, kc, project, location, "edge")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	svc, err := container.NewService(ctx, srv.ContainerOptions()...)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("connect as the GKE backend does", func(t *testing.T) {
		cl, err := svc.Projects.Locations.Clusters.Get(c.Path()).Context(ctx).Do()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(cl.Endpoint, "://") {
			t.Errorf("endpoint %q has a scheme; GKE's has none", cl.Endpoint)
		}
		ca, err := base64.StdEncoding.DecodeString(cl.MasterAuth.ClusterCaCertificate)
		if err != nil {
			t.Fatalf("clusterCaCertificate: %v", err)
		}
		cfg := &rest.Config{Host: "https://" + cl.Endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
		anonymous := kubernetes.NewForConfigOrDie(rest.CopyConfig(cfg))
		if _, err := anonymous.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
			t.Errorf("list namespaces without a token: err = %v, want Unauthorized or Forbidden", err)
		}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return &oauth2.Transport{Source: c.TokenSource(), Base: rt}
		}
		nss, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list namespaces with the token source: %v", err)
		}
		if len(nss.Items) == 0 {
			t.Error("no namespaces listed")
		}
	})

	op, err := svc.Projects.Locations.Clusters.NodePools.Create(c.Path(), &container.CreateNodePoolRequest{NodePool: &container.NodePool{
		Name:             pool,
		InitialNodeCount: 2,
		Config: &container.NodeConfig{
			MachineType: "ct5p-hightpu-4t",
			Labels:      map[string]string{"falcon.dev/accelerator": "v5p", "falcon.dev/topology": "2x2x2"},
			Taints:      []*container.NodeTaint{{Key: "google.com/tpu", Value: "present", Effect: "NO_SCHEDULE"}},
		},
		PlacementPolicy: &container.PlacementPolicy{Type: "COMPACT", TpuTopology: "2x2x2"},
	}}).Context(ctx).Do()
	if err != nil {
		t.Fatal(err)
	}
	waitOperation(ctx, t, svc, op)
	np, err := svc.Projects.Locations.Clusters.NodePools.Get(c.Path() + "/nodePools/" + pool).Context(ctx).Do()
	if err != nil || np.Status != fakegke.StatusRunning {
		t.Fatalf("pool after create: status %v, err %v; want RUNNING", np.Status, err)
	}

	begin := time.Now()
	nodes, err := c.WaitNodes(ctx, pool, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pool RUNNING, its 2 nodes Ready %s later", time.Since(begin).Round(time.Millisecond))
	wantLabels := map[string]string{
		kubeenv.LabelGKENodePool:       pool,
		kubeenv.LabelGKETPUAccelerator: "tpu-v5p-slice",
		kubeenv.LabelGKETPUTopology:    "2x2x2",
		"falcon.dev/accelerator":       "v5p",
		"falcon.dev/topology":          "2x2x2",
	}
	var nodeNames []string
	for _, n := range nodes {
		nodeNames = append(nodeNames, n.Name)
		for k, v := range wantLabels {
			if n.Labels[k] != v {
				t.Errorf("node %s label %s = %q, want %q", n.Name, k, n.Labels[k], v)
			}
		}
		wantTaints := []corev1.Taint{{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
		if !slices.EqualFunc(n.Spec.Taints, wantTaints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
			t.Errorf("node %s taints = %v, want %v", n.Name, n.Spec.Taints, wantTaints)
		}
		if got := n.Status.Capacity[kubeenv.ResourceTPU]; got.Cmp(resource.MustParse("4")) != 0 {
			t.Errorf("node %s capacity %s = %s, want 4", n.Name, kubeenv.ResourceTPU, got.String())
		}
	}

	if _, err := kc.CreateNamespace(ctx, "e2e"); err != nil {
		t.Fatal(err)
	}
	pods := kc.Clientset().CoreV1().Pods("e2e")
	tpus := corev1.ResourceList{kubeenv.ResourceTPU: resource.MustParse("4")}
	_, err = pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Annotations: map[string]string{kubeenv.AnnotationRunForever: "true"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{
				kubeenv.LabelGKENodePool:       pool,
				kubeenv.LabelGKETPUAccelerator: "tpu-v5p-slice",
				kubeenv.LabelGKETPUTopology:    "2x2x2",
			},
			Tolerations: []corev1.Toleration{{Key: "google.com/tpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "main", Image: "jax:latest",
				Resources: corev1.ResourceRequirements{Requests: tpus, Limits: tpus},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var running *corev1.Pod
	for running == nil {
		p, err := pods.Get(ctx, "worker", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			running = p
		}
		sleep(ctx, t)
	}
	if !slices.Contains(nodeNames, running.Spec.NodeName) {
		t.Errorf("pod ran on node %q, want one of pool %s's %v", running.Spec.NodeName, pool, nodeNames)
	}
	t.Logf("pod Running on %s", running.Spec.NodeName)

	op, err = svc.Projects.Locations.Clusters.NodePools.Delete(c.Path() + "/nodePools/" + pool).Context(ctx).Do()
	if err != nil {
		t.Fatal(err)
	}
	waitOperation(ctx, t, svc, op)
	begin = time.Now()
	if _, err := c.WaitNodes(ctx, pool, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("pool deleted, its nodes drained and gone %s later", time.Since(begin).Round(time.Millisecond))
	if _, err := pods.Get(ctx, "worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after its pool was deleted: err = %v, want NotFound (drained)", err)
	}
	if err := c.Err(); err != nil {
		t.Errorf("hooks: %v", err)
	}
}

func waitOperation(ctx context.Context, t *testing.T, svc *container.Service, op *container.Operation) {
	t.Helper()
	name := "projects/" + project + "/locations/" + location + "/operations/" + op.Name
	for op.Status != fakegke.OpDone {
		sleep(ctx, t)
		var err error
		if op, err = svc.Projects.Locations.Operations.Get(name).Context(ctx).Do(); err != nil {
			t.Fatal(err)
		}
	}
	if op.Error != nil {
		t.Fatalf("operation %s failed: %v", name, op.Error.Message)
	}
}

func sleep(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(50 * time.Millisecond):
	}
}
