// Package e2e drives the built `falcon` binary against a real `falcon dev`
// in a temporary data dir: the same commands users and agents type, checked
// through their JSON output, exit codes and the processes on this machine.
package e2e
