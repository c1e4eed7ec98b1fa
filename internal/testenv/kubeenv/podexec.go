package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/retry"
)

// WithPodExec makes the cluster serve exec the way a real one does, on top
// of WithPodLogs (which it implies): a client's pods/<pod>/exec goes to
// the kube-apiserver, which proxies it (WebSocket or SPDY from the client,
// SPDY to the node) to the "kubelet" of the pod's node, here kwok's
// server, which runs the command on this machine with the working
// directory and environment an Exec object names (ServePodExec). kwok also
// watches the Exec and ClusterExec resources (--enable-crds).
//
// kwok v0.8.0 never closes a command's stdin, and reports a non-zero exit only in an error message ("exit
// status 3", "signal: killed"), not as the kubelet's exit-code cause: a
// client reading codes must read that message too (podexec does).
func WithPodExec() Option { return func(o *options) { o.podLogs, o.podExec = true, true } }

var gvrExecs = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}

// ServePodExec makes commands exec'd into container of namespace/pod run on
// this machine in workDir with envs added to kwok's environment (a kwok
// Exec object named after the pod; created, or replaced). If the pod is
// bound to a node it returns once an exec of `true` succeeds through the
// apiserver.
func (c *Cluster) ServePodExec(ctx context.Context, namespace, pod, container, workDir string, envs map[string]string) error {
	if !c.podExec {
		return errors.New("kubeenv: ServePodExec needs a cluster started WithPodExec")
	}
	dyn, err := dynamic.NewForConfig(c.restConfig)
	if err != nil {
		return err
	}
	var envList []any
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		envList = append(envList, map[string]any{"name": k, "value": envs[k]})
	}
	spec := map[string]any{"execs": []any{map[string]any{
		"containers": []any{container},
		"local":      map[string]any{"workDir": workDir, "envs": envList},
	}}}
	res := dyn.Resource(gvrExecs).Namespace(namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := res.Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = res.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Exec",
				"metadata": map[string]any{"name": pod, "namespace": namespace},
				"spec":     spec,
			}}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cur.Object["spec"] = spec
		_, err = res.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubeenv: Exec %s/%s: %w", namespace, pod, err)
	}
	p, err := c.clientset.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && p.Spec.NodeName == "") {
		return nil
	}
	if err != nil {
		return err
	}
	for {
		err := c.execTrue(ctx, namespace, pod, container)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeenv: exec into %s/%s container %s not served: %w (last error: %v)", namespace, pod, container, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// execTrue runs `true` in the container through the apiserver.
func (c *Cluster) execTrue(ctx context.Context, namespace, pod, container string) error {
	req := c.clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(c.restConfig, "POST", req.URL())
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
}
