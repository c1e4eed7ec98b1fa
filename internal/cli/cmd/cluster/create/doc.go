// Package create implements `falcon cluster create`: register one cluster,
// from flags or from a clusters file holding just that cluster (-f).
package create
