// Package exec implements `falcon exp exec`: run a command in one rank of a
// running experiment, as `kubectl exec` does in a pod, through the API
// server (the CLI never holds cluster credentials). stdout and stderr stay
// apart, -i forwards stdin, -t gives the command a terminal (the local one
// in raw mode once the command starts, resized with the window), and the
// remote exit code becomes
// the CLI's: a script can run `falcon exp exec ID -- test -f done` and
// branch on it. --all-ranks runs the command in every rank at once, each
// output line after its rank (all.go), as pdsh does on hosts.
package exec
