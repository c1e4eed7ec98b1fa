// Package cluster groups the cluster commands (`falcon cluster ...`): which
// clusters exist, what accelerators they offer and whether they take work,
// and the registry's upkeep (create, apply a clusters file, set-status).
package cluster
