// Package exec implements `falcon exp exec`: run a command in one rank of a
// running experiment, as `kubectl exec` does in a pod, through the API
// server (the CLI never holds cluster credentials). stdout and stderr stay
// apart, -i forwards stdin, -t gives the command a terminal (the local one
// in raw mode, resized with the window), and the remote exit code becomes
// the CLI's: a script can run `falcon exp exec ID -- test -f done` and
// branch on it.
package exec
