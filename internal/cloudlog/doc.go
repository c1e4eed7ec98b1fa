// Package cloudlog reads the container logs of Falcon's jobs on GKE from
// Cloud Logging: 001's CloudLogRetriever. It is how `falcon exp logs` and
// `falcon exp logs export` reach a job's lines once its pods are gone, and
// the only package that speaks to Cloud Logging.
//
// A Target names one Kubernetes Job on one cluster; a Filter picks its lines
// (ranks, time window, an RE2 grep, the last N lines of each rank).
// BuildFilter turns the two into the Cloud Logging filter, so that the
// selection, grep included, happens on Google's side and only wanted lines
// travel. Retriever, on the official client
// (cloud.google.com/go/logging/apiv2), streams lines (Stream, optionally
// following new ones through TailLogEntries without losing or repeating
// lines at the seam), finds a workload's ranks (Ranks), and exports each
// rank's log to a gocloud.dev/blob bucket as it reads it (Export). None of
// them holds a whole log in memory.
//
// A rank is the pod's job-completion index, read from the entry's
// k8s-pod/batch_kubernetes_io/job-completion-index label or, on pods
// without it, from the pod name <job>-<index>-<suffix>.
//
// Bad input is an errdefs field error naming the field ("grep", "tail",
// ...). A failure of Cloud Logging, or of the bucket during an export, is a
// *RetrievalError (001's LogRetrievalError) with a Kind and a Reason: it
// never fails an experiment; the caller marks the log missing with the
// reason. The service account needs roles/logging.viewer on the cluster's
// project, and roles/storage.objectAdmin on the export bucket.
//
// Package cloudlogtest is a LoggingServiceV2 server for tests.
package cloudlog
