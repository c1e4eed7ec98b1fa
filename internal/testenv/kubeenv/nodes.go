package kubeenv

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations that steer what kwok does with a pod (see kwok.yaml). Put them
// on a Job's pod template. Only their presence matters for OOMKilled and
// RunForever; Duration and ExitCode are read.
const (
	// AnnotationDuration is how long a pod runs before it ends, as a Go
	// duration ("2s", "1m"); the default is 1s.
	AnnotationDuration = "falcon.test/duration"
	// AnnotationExitCode makes the pod's containers exit with this code
	// ("3"): the pod ends Failed with reason Error, or Succeeded for "0".
	AnnotationExitCode = "falcon.test/exit-code"
	// AnnotationOOMKilled makes the pod end Failed with its containers
	// terminated by reason OOMKilled, exit code 137.
	AnnotationOOMKilled = "falcon.test/oom-killed"
	// AnnotationRunForever keeps the pod Running until it is deleted.
	AnnotationRunForever = "falcon.test/run-forever"
)

// KwokNodeAnnotation with value "fake" marks the nodes kwok acts as the
// kubelet for. AddNodes sets it; a test creating nodes by hand must too.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// GKE's well-known labels and the TPU resource, for tests building TPU-like
// node pools.
const (
	LabelGKENodePool       = "cloud.google.com/gke-nodepool"
	LabelGKETPUAccelerator = "cloud.google.com/gke-tpu-accelerator"
	LabelGKETPUTopology    = "cloud.google.com/gke-tpu-topology"
	ResourceTPU            = corev1.ResourceName("google.com/tpu")
)

// defaultCapacity is what a node has of each resource that AddNodes' caller
// does not set.
var defaultCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("32"),
	corev1.ResourceMemory:           resource.MustParse("128Gi"),
	corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
}

// AddNodes registers n nodes that kwok manages and waits until all are
// Ready. labels are added to the usual kubernetes.io ones, taints go on the
// spec as given, and capacity (also the allocatable amount) overrides or
// extends the default 32 CPU, 128Gi memory, 100Gi ephemeral storage, 110
// pods. Nodes are named <cluster>-node-<k>, k counting up per cluster.
//
// A GKE TPU v7x slice of one 2x2x1 host:
//
//	c.AddNodes(ctx, 1,
//		map[string]string{
//			kubeenv.LabelGKETPUAccelerator: "tpu7x",
//			kubeenv.LabelGKETPUTopology:    "2x2x1",
//			kubeenv.LabelGKENodePool:       "falcon-xyz",
//		},
//		[]corev1.Taint{{Key: "google.com/tpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
//		corev1.ResourceList{kubeenv.ResourceTPU: resource.MustParse("4")})
func (c *Cluster) AddNodes(ctx context.Context, n int, labels map[string]string, taints []corev1.Taint, capacity corev1.ResourceList) ([]*corev1.Node, error) {
	capacity = mergeResources(defaultCapacity, capacity)
	nodes := make([]*corev1.Node, 0, n)
	for range n {
		k := c.nodeSeq.Add(1)
		name := fmt.Sprintf("%s-node-%d", c.name, k)
		l := map[string]string{
			corev1.LabelHostname:   name,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: "amd64",
			"type":                 "kwok",
		}
		maps.Copy(l, labels)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      l,
				Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			},
			Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{
				Capacity:    capacity,
				Allocatable: capacity,
				Addresses: []corev1.NodeAddress{
					// 10.128.0.0/16 holds 65k nodes, far more than a test makes.
					{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.128.%d.%d", (k>>8)&0xff, k&0xff)},
					{Type: corev1.NodeHostName, Address: name},
				},
			},
		}
		c.addKubeletEndpoint(&node.Status)
		created, err := c.clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return nodes, fmt.Errorf("create node %s: %w", name, err)
		}
		if len(created.Status.Capacity) == 0 { // kwok copies status it finds, so it must be there
			created.Status = node.Status
			if created, err = c.clientset.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return nodes, fmt.Errorf("set status of node %s: %w", name, err)
			}
		}
		nodes = append(nodes, created)
	}
	for i, node := range nodes {
		ready, err := c.waitNodeReady(ctx, node.Name)
		if err != nil {
			return nodes, err
		}
		nodes[i] = ready
	}
	return nodes, nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, name string) (*corev1.Node, error) {
	for {
		node, err := c.clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		if err == nil && nodeReady(node) {
			return node, nil
		}
		if exited, err := c.kwok.exited(); exited {
			return nil, fmt.Errorf("kwok %w (%v) before node %s was Ready", errExited, err, name)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("node %s not Ready: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func mergeResources(base, over corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(base)+len(over))
	for k, v := range base {
		out[k] = v.DeepCopy()
	}
	for k, v := range over {
		out[k] = v.DeepCopy()
	}
	return out
}

// CreateNamespace creates a namespace and waits until pods can be created in
// it, that is until its default service account exists.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := c.clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if err := c.waitServiceAccount(ctx, name); err != nil {
		return nil, err
	}
	return ns, nil
}
