// Package kube is the cluster backend for any conformant Kubernetes cluster:
// it submits each Falcon job as one Kubernetes Job, or one per slice of a
// multi-slice job (rendered by the render subpackage), learns its state from
// informers rather than by polling, and deletes them (with their pods) to
// stop it.
//
// Everything is keyed by the Falcon job ID: the Kubernetes Job's name is
// derived from it, so a dispatch retried after a crash finds the Job it
// created before instead of creating a second one. An informer per cluster
// watches only objects labelled app.kubernetes.io/managed-by=falcon and
// wakes the resource manager on every change.
//
// A cluster that cannot be reached, whether a call or an informer's watch
// found out, is retried with backoff; calls for it fail fast meanwhile, and
// Health tells the resource manager, which then makes none and shows the
// error in the cluster's status, so one dead cluster never stalls the
// others. Credentials come from the kubeconfig context, whose auth plugins
// (exec, OIDC) refresh tokens themselves, so long-lived watches survive
// token expiry.
package kube
