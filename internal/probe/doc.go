// Package probe is design 001's ClusterProber: it asks every cluster,
// all at once, whether it answers and how many of its workloads wait and
// run, each probe bounded by the cluster's probe_timeout_s.
//
// Kubernetes and GKE clusters are asked through their apiserver: the
// Kubernetes Jobs Falcon created there (app.kubernetes.io/managed-by=falcon)
// that have not ended, those with a pod ready counting as running and the
// others as queued. xpk clusters are asked with `xpk workload list`
// (package xpk), QUEUED and RUNNING rows counted. A probe that does not
// answer in time is unreachable with "probe timed out after Ns"; one whose
// command fails carries its stderr; output that cannot be read says so.
// None of it touches a job: a probe only reports.
//
// Loop runs the probes on a schedule in the controller and reports them to
// the API server, which keeps the last of each cluster; the API server's
// ProbeClusters runs a Prober on demand.
package probe
