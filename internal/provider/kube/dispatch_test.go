package kube_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// TestDispatchRunsAsClusterServiceAccount checks that a job's pods run as
// the service account registered on its cluster (the one Workload Identity
// lets mount the cluster's bucket), and as the namespace's default when the
// cluster names none: on the pods the Job controller creates, which are what
// the apiserver's service account admission resolves.
func TestDispatchRunsAsClusterServiceAccount(t *testing.T) {
	c := kubeenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	const ns = "falcon-jobs"
	if _, err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "falcon-runner", Namespace: ns}}
	if _, err := c.Clientset().CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := kube.New()
	t.Cleanup(b.Close)

	tests := []struct {
		name, jobID, serviceAccount, want string
	}{
		{"the cluster's", "job-sa-set", "falcon-runner", "falcon-runner"},
		{"none: the namespace's default", "job-sa-unset", "", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := &falconv1.Cluster{Id: "cl-edge", Name: "edge", Kubeconfig: c.KubeconfigPath(),
				KubeContext: c.Context(), Namespace: ns, ServiceAccount: tt.serviceAccount}
			j := cpuJob(tt.jobID, nil)
			if err := b.Dispatch(ctx, cluster, j); err != nil {
				t.Fatalf("Dispatch: %v", err)
			}
			job, err := c.Clientset().BatchV1().Jobs(ns).Get(ctx, render.Name(j.GetId()), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := job.Spec.Template.Spec.ServiceAccountName; got != tt.serviceAccount {
				t.Errorf("Job's pod template runs as %q, want %q", got, tt.serviceAccount)
			}
			for {
				pods, err := c.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + j.GetId()})
				if err != nil {
					t.Fatal(err)
				}
				if len(pods.Items) > 0 {
					if got := pods.Items[0].Spec.ServiceAccountName; got != tt.want {
						t.Errorf("pod %s runs as %q, want %q", pods.Items[0].Name, got, tt.want)
					}
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("the Job controller created no pod for %s: %v", j.GetId(), ctx.Err())
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
}
