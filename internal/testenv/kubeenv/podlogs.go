package kubeenv

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// WithPodLogs makes the cluster serve pod logs the way a real one does: a
// client's GET pods/<pod>/log goes to the kube-apiserver, which proxies it
// over TLS to the "kubelet" of the pod's node, here kwok's kubelet-like
// server, which reads the container's log file. The file is one the test
// writes, in the format a container runtime writes (see FormatCRILog and
// AppendPodLog), and is tied to a pod's container by ServePodLogs.
//
// What it sets up:
//   - kwok runs its server on a loopback port with a serving certificate
//     from the cluster CA (--server-address, --tls-cert-file) and watches
//     the Logs and ClusterLogs resources of kwok.x-k8s.io/v1alpha1 in the
//     apiserver (--enable-crds); their CRDs are installed before kwok
//     starts.
//   - AddNodes gives each node the kubelet endpoint a real kubelet reports:
//     status.daemonEndpoints.kubeletEndpoint.Port is kwok's port and an
//     InternalDNS address "localhost" is added to the node's addresses.
//     The apiserver prefers InternalDNS (--kubelet-preferred-address-types)
//     and verifies the kubelet's certificate against the cluster CA
//     (--kubelet-certificate-authority), so no client needs
//     insecureSkipTLSVerifyBackend. Nodes a test creates by hand serve no
//     logs unless it sets both itself (KubeletPort).
//
// kwok v0.8.0 cannot template a log file path by pod name, hence one Logs
// object per pod. Following (follow=true) works as on a kubelet, with one
// difference: kwok cannot know that a container has exited, so a followed
// stream stays open after the pod ends, until the client closes it.
func WithPodLogs() Option { return func(o *options) { o.podLogs = true } }

// KubeletPort is the port of kwok's kubelet-like server on 127.0.0.1, or 0
// if the cluster was started without WithPodLogs.
func (c *Cluster) KubeletPort() int { return c.kwokPort }

// kwokDNSName is the node address the apiserver dials to reach kwok's server.
const kwokDNSName = "localhost"

var (
	gvrLogs        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
	gvrClusterLogs = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterlogs"}
	gvrCRD         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

type podLogArgs struct{ apiserver, kwok []string }

// podLogArgs issues kwok's serving certificate and returns the flags that
// connect the apiserver to kwok's server.
func (c *Cluster) podLogArgs() (podLogArgs, error) {
	cert, key, err := c.pki.issue("kwok", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kwok"},
		DNSNames:    []string{kwokDNSName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return podLogArgs{}, err
	}
	port := strconv.Itoa(c.kwokPort)
	return podLogArgs{
		apiserver: []string{
			"--kubelet-certificate-authority=" + c.pki.CACert,
			"--kubelet-preferred-address-types=InternalDNS,InternalIP,Hostname,ExternalDNS,ExternalIP",
		},
		kwok: []string{
			"--server-address=127.0.0.1:" + port,
			"--node-port=" + port,
			"--tls-cert-file=" + cert,
			"--tls-private-key-file=" + key,
			"--enable-crds=" + c.crds(),
		},
	}, nil
}

// crds are the kwok resources kwok watches in the apiserver.
func (c *Cluster) crds() string {
	if c.podExec {
		return "Logs,ClusterLogs,Exec,ClusterExec"
	}
	return "Logs,ClusterLogs"
}

// addKubeletEndpoint gives a node's status what the apiserver needs to reach
// kwok's server for the node's pods' logs.
func (c *Cluster) addKubeletEndpoint(status *corev1.NodeStatus) {
	if !c.podLogs {
		return
	}
	status.DaemonEndpoints.KubeletEndpoint.Port = int32(c.kwokPort)
	status.Addresses = append(status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: kwokDNSName})
}

// installLogCRDs creates the CRDs of kwok's Logs and ClusterLogs and waits
// until both are served, so that kwok, started after it, finds them.
func (c *Cluster) installLogCRDs(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(c.restConfig)
	if err != nil {
		return err
	}
	kinds := []struct {
		kind, plural, scope string
	}{
		{"Logs", "logs", "Namespaced"},
		{"ClusterLogs", "clusterlogs", "Cluster"},
	}
	served := []schema.GroupVersionResource{gvrLogs, gvrClusterLogs}
	if c.podExec {
		kinds = append(kinds, struct{ kind, plural, scope string }{"Exec", "execs", "Namespaced"},
			struct{ kind, plural, scope string }{"ClusterExec", "clusterexecs", "Cluster"})
		served = append(served, gvrExecs, schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterexecs"})
	}
	for _, d := range kinds {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1",
			"kind":       "CustomResourceDefinition",
			"metadata":   map[string]any{"name": d.plural + ".kwok.x-k8s.io"},
			"spec": map[string]any{
				"group": "kwok.x-k8s.io",
				"names": map[string]any{"kind": d.kind, "listKind": d.kind + "List", "plural": d.plural, "singular": d.plural},
				"scope": d.scope,
				"versions": []any{map[string]any{
					"name": "v1alpha1", "served": true, "storage": true,
					// kwok validates what it reads; the test harness needs no
					// server-side schema beyond "an object".
					"schema": map[string]any{"openAPIV3Schema": map[string]any{
						"type": "object", "x-kubernetes-preserve-unknown-fields": true,
					}},
					"subresources": map[string]any{"status": map[string]any{}},
				}},
			},
		}}
		if _, err := dyn.Resource(gvrCRD).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
	}
	// Established is not enough: the resource is served a moment later.
	for _, gvr := range served {
		for {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not served: %w (last error: %v)", gvr.Resource, ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// waitKwokServer waits until kwok's server answers over TLS with a
// certificate the cluster CA signed.
func (c *Cluster) waitKwokServer(ctx context.Context) error {
	return c.waitHTTP(ctx, c.kwok, "https://127.0.0.1:"+strconv.Itoa(c.kwokPort)+"/healthz")
}

// ServePodLogs makes the log of container in namespace/pod the contents of
// file: a kwok Logs object named after the pod says so (created, or updated
// if it exists; other containers' entries are kept). file is created empty
// if missing, since the kubelet endpoint fails on a missing file; appending
// to it later is what a running container does (AppendPodLog).
//
// If the pod exists and is bound to a node, ServePodLogs returns once its
// log is served through the apiserver, so the caller's first read sees the
// file; otherwise it returns at once and kwok picks the object up within
// moments (a read before then fails, as a kubelet's does for a container
// that has not started).
func (c *Cluster) ServePodLogs(ctx context.Context, namespace, pod, container, file string) error {
	if !c.podLogs {
		return errors.New("kubeenv: ServePodLogs needs a cluster started WithPodLogs")
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.restConfig)
	if err != nil {
		return err
	}
	entry := map[string]any{"containers": []any{container}, "logsFile": file, "follow": true}
	res := dyn.Resource(gvrLogs).Namespace(namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := res.Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kwok.x-k8s.io/v1alpha1",
				"kind":       "Logs",
				"metadata":   map[string]any{"name": pod, "namespace": namespace},
				"spec":       map[string]any{"logs": []any{entry}},
			}}
			_, err = res.Create(ctx, obj, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		logs, _, _ := unstructured.NestedSlice(cur.Object, "spec", "logs")
		kept := []any{entry}
		for _, l := range logs {
			if m, ok := l.(map[string]any); !ok || !namesContainer(m, container) {
				kept = append(kept, l)
			}
		}
		if err := unstructured.SetNestedSlice(cur.Object, kept, "spec", "logs"); err != nil {
			return err
		}
		_, err = res.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubeenv: Logs %s/%s: %w", namespace, pod, err)
	}

	p, err := c.clientset.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && p.Spec.NodeName == "") {
		return nil
	}
	if err != nil {
		return err
	}
	var zero int64
	for {
		err := c.clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &zero}).Do(ctx).Error()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeenv: log of %s/%s container %s not served: %w (last error: %v)", namespace, pod, container, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func namesContainer(entry map[string]any, container string) bool {
	names, _, _ := unstructured.NestedStringSlice(entry, "containers")
	for _, n := range names {
		if n == container {
			return true
		}
	}
	return false
}

// criPartMax is where containerd and CRI-O split a long line into partial
// ("P") records; the kubelet joins them again when it serves the log.
const criPartMax = 16 * 1024

// FormatCRILog returns text as a container runtime writes it to a container
// log file: "<RFC 3339 nano time> <stream> F <text>\n", a text longer than
// 16 KiB split first into "P" records of 16 KiB, all stamped ts, as
// containerd does. stream is "stdout" or "stderr"; text must not contain a
// newline (it is one line of output).
func FormatCRILog(ts time.Time, stream, text string) []byte {
	stamp := ts.UTC().Format(time.RFC3339Nano)
	var out []byte
	for len(text) > criPartMax {
		out = fmt.Appendf(out, "%s %s P %s\n", stamp, stream, text[:criPartMax])
		text = text[criPartMax:]
	}
	return fmt.Appendf(out, "%s %s F %s\n", stamp, stream, text)
}

// AppendPodLog appends lines to a container log file, as stdout, each
// stamped ts, in one write.
func AppendPodLog(file string, ts time.Time, lines ...string) error {
	var data []byte
	for _, l := range lines {
		data = append(data, FormatCRILog(ts, "stdout", l)...)
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
