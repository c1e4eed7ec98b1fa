// Package gke manages the GKE node pools Falcon runs TPU and GPU jobs on
// (000 section 5, lifecycle phases 3 and 6) through the official REST
// client libraries for container v1 and compute v1.
//
// TPU and GPU pools go through the same lifecycle; they differ only in the
// pool asked for. A GPU pool's machine type and GPU count come from the
// accelerator table (a3-highgpu-8g with 8 nvidia-h100-80gb), stated in its
// acceleratorConfig with GKE's driver installation (LATEST), and its shape
// label is hosts x GPUs per host (1x8gpu), since a GPU slice has no
// topology and only a pool of the same count and size can serve the next
// job.
//
// A job gets its own pool, named deterministically from the job ID, so a
// controller restarted in the middle of a creation adopts the pool instead
// of creating a second one (and then follows the pool's status; the create
// operation's name is not needed, GKE's error is on the pool too). Before creating, the Manager
// reads the cluster's default reservation from Compute and consumes it when
// it has room for the slice's hosts, falling back to flex-start otherwise;
// the mode actually used picks how long an idle pool lingers. Failures carry
// the lifecycle.Reason the job will fail with (NodePoolTimeout,
// NodePoolFailed), so the resource manager does not parse messages.
//
// A multi-slice job gets a pool group instead (slices.go): one pool per
// slice under the group's name, one supply mode for all of them, listed to
// the resource manager as one pool whose shape counts the slices, ready
// when every member runs, failed when one fails, and deleted member by
// member, so the slices are held, reused and released together.
//
// Nothing here blocks for minutes: Ensure starts a create, Check and Look
// look at a pool once (Look at a group may start creating the members a
// restart left uncreated), StartDelete and Delete ask for a deletion. Waiting, retrying, deciding
// whether an idle pool is reused and sweeping orphans belong to the
// resource manager's level-triggered cycle: it owns the queues and the jobs
// table. Backend adapts all of this to resourcemanager.PoolBackend and runs
// the Kubernetes side through the kube backend. This package only talks to
// Google's APIs, and is tested against fakegke, which speaks their wire
// protocol.
package gke
