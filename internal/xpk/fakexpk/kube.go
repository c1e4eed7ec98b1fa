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
	labelJobSet   = "jobset.sigs.k8s.io/jobset-name"
	labelJobIndex = "jobset.sigs.k8s.io/job-index"
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
	numSlices := atoiOr(o.str("--num-slices"), 1)
	perSlice := int32(max(vmsOf(o)/numSlices, 1))
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
	// xpk's JobSet has one replicated job, slice-job, with a replica per
	// slice; JobSet names each Job <jobset>-slice-job-<index>, labels it
	// and its pods with the JobSet's name and the index, and xpk's template
	// gives a multi-slice workload's pods the MEGASCALE variables, the
	// coordinator being slice 0's first pod under the JobSet's subdomain.
	for i := range numSlices {
		labels := map[string]string{labelWorkload: name, labelJobSet: name, labelJobIndex: strconv.Itoa(i)}
		podEnv := slices.Clone(env)
		if numSlices > 1 {
			podEnv = append(podEnv,
				corev1.EnvVar{Name: "MEGASCALE_COORDINATOR_ADDRESS", Value: sliceJob(name, 0) + "-0." + name},
				corev1.EnvVar{Name: "MEGASCALE_NUM_SLICES", Value: strconv.Itoa(numSlices)},
				corev1.EnvVar{Name: "MEGASCALE_SLICE_ID", Value: strconv.Itoa(i)},
			)
		}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name: sliceJob(name, i), Namespace: ns,
				Labels:      map[string]string{labelWorkload: name, labelQueue: queueName, labelJobSet: name, labelJobIndex: strconv.Itoa(i)},
				Annotations: map[string]string{annoPriority: priorityOf(o)},
			},
			Spec: batchv1.JobSpec{
				Parallelism: &perSlice, Completions: &perSlice, BackoffLimit: &zero,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{
							Name: "jax-tpu", Image: image, Env: podEnv,
							Command: []string{"bash", "-c", o.str("--command")},
						}},
					},
				},
			},
		}
		if _, err := k.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// sliceJob is JobSet's name for the Job of one slice.
func sliceJob(workload string, slice int) string {
	return workload + "-slice-job-" + strconv.Itoa(slice)
}

func (k *kubeStore) remove(ctx context.Context, name string) (bool, error) {
	list, err := k.cs.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labelWorkload + "=" + name})
	if err != nil {
		return false, err
	}
	bg := metav1.DeletePropagationBackground
	deleted := false
	for _, j := range list.Items {
		err := k.cs.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return deleted, err
		default:
			deleted = true
		}
	}
	return deleted, nil
}

// list derives xpk's rows from the Jobs, one row per workload over its
// slices' Jobs, as JobSet reports the set: finished once every slice's Job
// completed, or as soon as one failed (JobSet's failure policy ends the
// set), with JobSet's messages; Admitted with its VMs running once every
// slice's pods are ready; otherwise waiting for quota.
func (k *kubeStore) list(ctx context.Context) ([]row, error) {
	list, err := k.cs.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labelWorkload})
	if err != nil {
		return nil, err
	}
	byWorkload := map[string][]batchv1.Job{}
	var names []string
	for _, j := range list.Items {
		w := j.Labels[labelWorkload]
		if _, ok := byWorkload[w]; !ok {
			names = append(names, w)
		}
		byWorkload[w] = append(byWorkload[w], j)
	}
	var out []row
	for _, name := range names {
		jobs := byWorkload[name]
		first := jobs[0]
		var needed, ready, succeeded int32
		complete, allRunning := 0, true
		var failed, done *batchv1.JobCondition
		for i := range jobs {
			j := &jobs[i]
			n := int32(1)
			if j.Spec.Parallelism != nil {
				n = *j.Spec.Parallelism
			}
			needed += n
			succeeded += j.Status.Succeeded
			if j.CreationTimestamp.Before(&first.CreationTimestamp) {
				first = *j // the set is as old as its first Job
			}
			if j.Status.Ready != nil {
				ready += *j.Status.Ready
			}
			if c := condition(j, batchv1.JobFailed); c != nil && failed == nil {
				failed = c
			}
			if c := condition(j, batchv1.JobComplete); c != nil {
				complete++
				if done == nil || c.LastTransitionTime.After(done.LastTransitionTime.Time) {
					done = c
				}
			}
			if !(j.Status.Active >= n && j.Status.Active > 0 && podsRunning(ctx, k.cs, j)) {
				allRunning = false
			}
		}
		r := row{Name: name, Created: first.CreationTimestamp.UTC().Format(time.RFC3339),
			Priority: first.Annotations[annoPriority], Needed: strconv.Itoa(int(needed))}
		switch {
		case failed != nil:
			r.Status, r.Message, r.StatusTime = "Finished", "JobSet failed", failed.LastTransitionTime.UTC().Format(time.RFC3339)
			r.Running = r.Needed
		case complete == len(jobs):
			r.Status, r.Message, r.StatusTime = "Finished", "JobSet finished successfully", done.LastTransitionTime.UTC().Format(time.RFC3339)
			r.Running, r.Done = r.Needed, strconv.Itoa(int(succeeded))
		case ready >= needed || allRunning:
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

func condition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func podsRunning(ctx context.Context, cs kubernetes.Interface, j *batchv1.Job) bool {
	// This Job's pods only: a workload's other slices are asked for their own.
	pods, err := cs.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + j.Name})
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
