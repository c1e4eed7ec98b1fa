// Package resourcemanager moves jobs from Pending to a terminal status: it
// picks a cluster for each waiting job, dispatches it through that cluster's
// Backend, reconciles what the backend reports, enforces timeouts and carries
// out aborts.
//
// Like every Falcon controller it is level-triggered. It keeps no state of
// its own between cycles: the job rows (status, reason, cluster) say how far
// each job got, every backend call is idempotent and keyed by the job ID, and
// every write is conditional on the status read. A crash between any two
// lines therefore converges on restart: a job left "Dispatching" is
// dispatched again (finding its existing processes or pods), and an abort
// that landed while a write was in flight wins.
//
// Backends are small and declared here, where they are used; the local
// process backend lives in internal/provider/local.
package resourcemanager
