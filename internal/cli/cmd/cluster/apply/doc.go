// Package apply implements `falcon cluster apply`: converge the cluster
// registry to a clusters file, the registry's configuration as code.
package apply
