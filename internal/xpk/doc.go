// Package xpk is design 001's XpkWorkloadManager: it drives workloads on a
// GKE cluster through the xpk CLI (`xpk workload create|list|delete`),
// building each command exactly as 001 section 4 does and reading
// `xpk workload list` from the table xpk really prints.
//
// The table is read by its header: xpk pads every column to its widest
// value and separates columns by three spaces, so each value starts where
// its header does. States are mapped as xpk's own filters map them
// (core/workload.py, _filter_workload): Admitted or Evicted with VMs
// running is RUNNING; Admitted, Evicted or QuotaReserved with none running
// is QUEUED; Finished with "failed" in its message is FAILED, with
// "finished" COMPLETED; anything else is UNKNOWN. Output that cannot be
// read that way is an *OutputError that says so; it never reads as "no
// workloads".
//
// Errors are typed as 001 names them: *WorkloadSubmitError (create failed;
// it carries xpk's stderr), *WorkloadNotFoundError (a delete or a status
// of a workload that does not exist: callers treat it as a warning), and
// *ClusterUnreachableError (the command timed out, failed, or could not be
// started). xpk runs through a Runner (os/exec in production), each call
// bounded by its context.
//
// Upstream xpk has no --namespace flag (its workloads live in the default
// namespace); 001 passes one. The manager passes it only when a namespace
// is known (the spec's, else the cluster's default_namespace), so a cluster
// registered without default_namespace works with upstream xpk.
package xpk
