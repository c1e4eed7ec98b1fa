// Package podexec runs a command in the task container of one rank's pod,
// through the cluster's apiserver, as `kubectl exec` does: client-go's
// remotecommand over WebSocket first and SPDY when the upgrade fails (an
// older apiserver, a proxy that drops WebSockets), with kubectl's own test
// for when to fall back. The API server calls it for `falcon exp exec` and
// `exp cp` on Kubernetes and GKE clusters; the CLI never reaches a
// cluster.
package podexec
