package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The labels xpk puts on its JobSet and pods.
const (
	labelWorkload = "xpk.google.com/workload"
	labelQueue    = "kueue.x-k8s.io/queue-name"
	queueName     = "multislice-queue"
	annoPriority  = "fakexpk.falcon.dev/priority"
)

type kubeStore struct{ cs kubernetes.Interface }

func newKubeStore(path string) (*kubeStore, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("error: error loading config file %q: %v", path, err)
	}
	cfg.Timeout = 20 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kubeStore{cs: cs}, nil
}

func (k *kubeStore) find(ctx context.Context, name string) (*batchv1.Job, error) {
	list, err := k.cs.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labelWorkload + "=" + name})
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

func (k *kubeStore) exists(ctx context.Context, name string) (bool, error) {
	j, err := k.find(ctx, name)
	return j != nil, err
}

func (k *kubeStore) create(ctx context.Context, o parsed) error {
	name := o.str("--workload")
	ns := o.str("--namespace")
	if ns == "" {
		ns = "default"
	}
	vms := int32(vmsOf(o))
	var env []corev1.EnvVar
	for _, e := range o.values["--env"] {
		k, v, _ := strings.Cut(e, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	image := o.str("--docker-image")
	if image == "" {
		image = o.str("--base-docker-image")
	}
	if image == "" {
		image = "python:3.10"
	}
	zero := int32(0)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{labelWorkload: name, labelQueue: queueName},
			Annotations: map[string]string{annoPriority: priorityOf(o)},
		},
		Spec: batchv1.JobSpec{
			Parallelism: &vms, Completions: &vms, BackoffLimit: &zero,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelWorkload: name}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "jax-tpu", Image: image, Env: env,
						Command: []string{"bash", "-c", o.str("--command")},
					}},
				},
			},
		},
	}
	_, err := k.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	return err
}

func (k *kubeStore) remove(ctx context.Context, name string) (bool, error) {
	j, err := k.find(ctx, name)
	if err != nil || j == nil {
		return false, err
	}
	bg := metav1.DeletePropagationBackground
	err = k.cs.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// list derives xpk's rows from the Jobs: a finished Job is Finished with
// JobSet's messages, one whose pods are ready is Admitted with its VMs
// running, any other waits for quota.
func (k *kubeStore) list(ctx context.Context) ([]row, error) {
	list, err := k.cs.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labelWorkload})
	if err != nil {
		return nil, err
	}
	var out []row
	for _, j := range list.Items {
		needed := int32(1)
		if j.Spec.Parallelism != nil {
			needed = *j.Spec.Parallelism
		}
		r := row{Name: j.Labels[labelWorkload], Created: j.CreationTimestamp.UTC().Format(time.RFC3339),
			Priority: j.Annotations[annoPriority], Needed: strconv.Itoa(int(needed))}
		ready := int32(0)
		if j.Status.Ready != nil {
			ready = *j.Status.Ready
		}
		cond := func(t batchv1.JobConditionType) *batchv1.JobCondition {
			for i, c := range j.Status.Conditions {
				if c.Type == t && c.Status == corev1.ConditionTrue {
					return &j.Status.Conditions[i]
				}
			}
			return nil
		}
		switch {
		case cond(batchv1.JobComplete) != nil:
			c := cond(batchv1.JobComplete)
			r.Status, r.Message, r.StatusTime = "Finished", "JobSet finished successfully", c.LastTransitionTime.UTC().Format(time.RFC3339)
			r.Running, r.Done = r.Needed, strconv.Itoa(int(j.Status.Succeeded))
		case cond(batchv1.JobFailed) != nil:
			c := cond(batchv1.JobFailed)
			r.Status, r.Message, r.StatusTime = "Finished", "JobSet failed", c.LastTransitionTime.UTC().Format(time.RFC3339)
			r.Running = r.Needed
		case ready > 0 || j.Status.Active >= needed && j.Status.Active > 0 && podsRunning(ctx, k.cs, &j):
			r.Status, r.Message, r.StatusTime = "Admitted", "Admitted by ClusterQueue cluster-queue", r.Created
			r.Running = strconv.Itoa(int(needed))
		default:
			r.Status, r.StatusTime = "QuotaReserved", r.Created
			r.Message = fmt.Sprintf("couldn't assign flavors to pod set slice-job: insufficient unused quota, %d more needed", needed-ready)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.Created+a.Name, b.Created+b.Name) })
	return out, nil
}

func podsRunning(ctx context.Context, cs kubernetes.Interface, j *batchv1.Job) bool {
	pods, err := cs.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelWorkload + "=" + j.Labels[labelWorkload]})
	if err != nil || len(pods.Items) == 0 {
		return false
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			return false
		}
	}
	return true
}
