// Package xpk is the resource manager's backend for clusters of provider
// xpk: each Falcon job becomes one xpk workload, created, watched and
// deleted through the xpk CLI (package xpk), so Falcon runs jobs on
// clusters that xpk manages (their Kueue queues, node pools and JobSets).
//
// Everything is keyed by the job ID: the workload is named falcon-<job id>
// (a valid xpk name of 21 characters), so a dispatch retried after a crash
// finds the workload it created. States map to the job's phases: QUEUED is
// Pending (the job keeps its queue slot, with xpk's status message), RUNNING
// is Running, COMPLETED Succeeded, FAILED Failed with xpk's message, a
// workload xpk no longer lists Unknown. UNKNOWN (a status xpk's own filters
// do not name) is Pending with xpk's status, except PodsReady, which is
// Kueue's word for a workload whose pods all run.
//
// A list that fails or cannot be read is an error of the observation, never
// an outcome: the resource manager logs it and looks again, and no job is
// failed because xpk could not be read. A create that xpk refuses fails the
// job with xpk's stderr (001's WorkloadSubmitError); one that timed out or
// could not reach the cluster is retried; an xpk that cannot be run at all
// fails it at once, saying so. A delete of a workload that is gone is a
// warning.
//
// Each cluster's credentials come from xpk.Credentials, prepared once per
// cluster (a kubeconfig of its own) rather than by every run.
package xpk
