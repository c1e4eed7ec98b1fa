// Package queue is the resource manager's queueing and selection logic: which
// cluster a waiting job should queue in, which job a queue hands its slot to
// next, and where every waiting job stands. It does no I/O and reads the time
// only through an injected clock, so every decision is deterministic and can
// be replayed in a test or a what-if run.
//
// There is one queue per Key: a cluster and a shape (Key.Topology: a TPU
// slice's topology, a GPU type and count such as nvidia-h100-80gb:8, or cpu;
// the resource manager chooses it). A queue lets at most one
// job at a time be acquiring resources (Provisioning or Dispatching): two
// node-pool creations racing in one cluster for the same shape would fight
// over the same quota and reservation. Jobs whose pods are Running no longer
// hold the slot, so execution parallelism is bounded by hardware, not by the
// queue. Different topologies and different clusters never block each other.
//
// When a slot is free, Pick chooses the next job: FIFO within an actor (the
// user who submitted it), round-robin across actors. Concretely, each actor's
// earliest job is a candidate; if there is more than one candidate, the actor
// who got this queue's previous slot steps aside; the earliest remaining
// candidate wins. Created time orders jobs and the job ID breaks ties, so the
// order is total and does not depend on map iteration or insertion order.
//
// The resource manager drives it once per cycle:
//
//  1. Enqueue every Pending job not yet queued (Select picks the cluster:
//     by default an idle node pool of the right shape first, else the
//     shortest queue; PolicyPriority takes design 001's priority order over
//     reachable clusters within max_queue_depth); an unplaceable job keeps
//     its *UnplaceableError text as its message. EnqueueExplained also
//     returns the decision record (Selection): every cluster's facts, why
//     each was passed over or how it ranked, the choice and its reason.
//  2. Pick from every Ready queue and start provisioning what it returns.
//  3. Release jobs whose pods all run; Remove jobs that ended or were aborted.
//  4. Write each waiting job's Waiting position and Message.
//
// The Scheduler is an in-memory index, not a source of truth: the job rows in
// the store are. After a controller restart the caller rebuilds it by adding
// every waiting job (Add) and every job still Provisioning or Dispatching
// (MarkAcquiring). Only one thing is lost that the rows cannot tell: which
// actor was served last in a queue whose slot is free at the time of the
// crash. Without it the next pick in that queue may serve the same actor
// twice in a row, a one-turn fairness blip that cannot starve anyone. A
// caller that wants even that can persist LastServed and restore it with
// SetLastServed.
//
// Errors are typed (ErrInvalid, ErrNotFound, ErrConflict, ErrSlotBusy,
// ErrNotAcquiring, and *UnplaceableError for ErrUnplaceable); the caller maps
// them to Falcon's errdefs or to a job's Waiting message. The package imports
// nothing but the standard library so it stays usable from a simulator.
package queue
