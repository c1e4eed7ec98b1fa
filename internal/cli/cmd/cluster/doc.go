// Package cluster groups the cluster commands (`falcon cluster ...`): which
// clusters exist, what accelerators they offer and whether they take work.
package cluster
