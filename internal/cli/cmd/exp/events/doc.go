// Package events implements `falcon exp events`: an experiment's history
// of changes (its own and its jobs' status, reason and message, node pools,
// TTL warnings), and with -f the changes as they happen until it ends. It
// is what scripts that polled `exp get` in loops can read instead, one JSON
// object per line with -o json.
package events
