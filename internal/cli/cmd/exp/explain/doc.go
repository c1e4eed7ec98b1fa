// Package explain is `falcon exp explain`: for each job of an experiment,
// its status, the decision record of its placement (why this cluster, why
// not the others) and, while it waits, its place in line, the job holding
// its queue's slot and which clusters could take it now and why not. The
// "now" part is judged on the client with the resource manager's own
// selection code (package queue) from the registry, the clusters' reported
// queues and their last probes, so it says what the next placement would
// see, not what the resource manager decided.
package explain
