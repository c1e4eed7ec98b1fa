// Package validation checks an experiment request before anything is written,
// and reports every problem at once as errdefs.FieldErrors whose field paths
// match the manifest (role_to_task_spec.worker.replica), so a user or agent
// can fix the file without guessing.
//
// The rules protect the rest of the system: names become Kubernetes object
// names and paths (DNS-1123 labels), the config string is bounded because
// large data belongs in artifacts, never in the database, and env names that
// Falcon itself sets are reserved so a job always sees its true identity.
// Resources are limited to cpu, memory and ephemeral-storage with positive
// Kubernetes quantities and limits no lower than their requests, which is
// what a kube-apiserver would otherwise refuse only at dispatch, long after
// the user has walked away. Placement holds a request against the
// registered clusters in the same spirit: a device type its pinned cluster
// does not take, a missing image where every candidate cluster runs
// containers, a command line no candidate's backend can run.
package validation
