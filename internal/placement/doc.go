// Package placement holds the rules that say where a task may run and what
// a backend can run, for the two places that must agree on them: the API
// server, which refuses at create what could only fail later, and the
// resource manager, which places and dispatches the task. Were each to keep
// its own copy, an experiment accepted by one would wait forever in the
// other.
//
// Candidates answers which registered clusters may take a task: the pinned
// cluster, or the clusters offering its accelerator type, or, when no
// registered cluster offers that type, the ones listing no types at all
// (the local machine under `falcon dev`). BackendOf says what each backend
// needs of a task: an image for a container, and command lines, environments
// and objects within the limits of Linux and etcd.
//
// QueueKey names the queue a task waits in, and QueueCluster and
// QueueProbe describe a registered cluster to selection (package queue), so
// that the resource manager and `falcon exp explain` judge a job alike;
// SelectionRecord is selection's decision record as both write it.
//
// The package reads the registry's API types and does no I/O.
package placement
