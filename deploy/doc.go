// Package deploy holds Falcon's Kubernetes manifests (a kustomize base and
// the gke and dev overlays) and, in its test, what keeps them honest: every
// overlay is rendered with kustomize's Go API and applied with a strict
// server-side dry-run to a real kube-apiserver; the invariants a reviewer
// checks by eye (replicas, probes on the real health endpoints, non-root,
// Workload Identity, which pods reach the gRPC port, every Secret accounted
// for) are checked by code; and every container's arguments are parsed by
// the real `falcon` command tree, so a renamed flag fails here and not in
// the cluster. docs/operations.md is the operator's side of the same kit.
package deploy
