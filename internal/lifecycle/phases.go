package lifecycle

import (
	"fmt"
	"slices"
)

// Table is a transition table over a lifecycle that is not one of the three
// entities' Status: the phases a Pending job passes through, and the states
// of a node pool. Unlike Machine, staying put is legal only where a row says
// so, because a phase that may not repeat (a pool that was Deleting becoming
// Deleting "again") is a bug worth catching.
type Table[S ~string] struct {
	Name        string
	Initial     S
	Transitions []Step[S]
}

// Step is one row: any of From may move to To.
type Step[S ~string] struct {
	From []S
	To   S
}

// States lists every state of the table, initial first, in a stable order.
func (t Table[S]) States() []S {
	seen := []S{t.Initial}
	for _, st := range t.Transitions {
		for _, s := range append(slices.Clone(st.From), st.To) {
			if !slices.Contains(seen, s) {
				seen = append(seen, s)
			}
		}
	}
	return seen
}

// Can reports whether from -> to is a row of the table.
func (t Table[S]) Can(from, to S) bool {
	for _, st := range t.Transitions {
		if st.To == to && slices.Contains(st.From, from) {
			return true
		}
	}
	return false
}

// Check returns an error naming the table when from -> to is not legal.
func (t Table[S]) Check(from, to S) error {
	if t.Can(from, to) {
		return nil
	}
	return fmt.Errorf("illegal %s transition %s -> %s", t.Name, from, to)
}

// PendingPhases is the life of a job while its Status is Pending, told by its
// Reason (000's lifecycle phases):
//
//	Waiting ──picked──▶ Provisioning / ProvisioningFallback ──pool ready──▶ Dispatching
//	   │                      ▲                                                ▲
//	   └──picked, at the pool cap──▶ WaitingForPool ──a pool falls free──────────┤
//	   └──────picked, idle pool of its shape or no pool needed───────────────────┤
//	   └──picked ahead──▶ Next ──the slot's holder runs or ends──────────────────┘
//
// A pick is recorded as Dispatching, with the cluster it was picked for
// (the job holds its queue's slot from then); a job that needs a node pool
// then moves on to Provisioning, ProvisioningFallback or WaitingForPool
// as it gets one. Waiting repeats (its queue position changes); WaitingForPool (the pool
// cap) ends when a pool of the shape falls free (→ Dispatching, or →
// Provisioning when it is still being created) or the cluster has fewer
// pools than the cap (→ Provisioning / ProvisioningFallback, a create); an
// acquiring job may repeat its phase (progress messages), switch from a pool still being created to
// an idle one that is ready (→ Dispatching), or take over a pool another job
// abandoned mid-creation (→ Provisioning). Leaving Pending (Running, Failed,
// Aborting) is JobMachine's business. Nothing goes back to Waiting: a job
// that holds its queue's slot keeps it until it runs or ends, which is the
// queue rule of 000 section 4.
//
// Next is a pick taken ahead, while another job holds the slot, for a job
// that needs nothing but its submission (no node pool): its row names the
// cluster before anything is created there, so the resource manager may
// submit it the moment it sees the holder's pods run, and record
// Dispatching after. It does not hold the slot, and it never goes back to
// Waiting: its cluster may hold its Job already, so it is not placed
// elsewhere.
var PendingPhases = Table[Reason]{
	Name:    "pending phase",
	Initial: ReasonWaiting,
	Transitions: []Step[Reason]{
		{From: []Reason{ReasonWaiting}, To: ReasonWaiting},
		{From: []Reason{ReasonWaiting, ReasonNext}, To: ReasonNext},
		{From: []Reason{ReasonWaiting, ReasonWaitingForPool}, To: ReasonWaitingForPool},
		{From: []Reason{ReasonWaiting, ReasonWaitingForPool, ReasonProvisioning, ReasonProvisioningFallback}, To: ReasonProvisioning},
		{From: []Reason{ReasonWaiting, ReasonWaitingForPool, ReasonProvisioningFallback}, To: ReasonProvisioningFallback},
		{From: []Reason{ReasonWaiting, ReasonNext, ReasonWaitingForPool, ReasonProvisioning, ReasonProvisioningFallback, ReasonDispatching}, To: ReasonDispatching},
		// The pick, recorded as Dispatching, of a job that needs a pool.
		{From: []Reason{ReasonDispatching}, To: ReasonWaitingForPool},
		{From: []Reason{ReasonDispatching}, To: ReasonProvisioning},
		{From: []Reason{ReasonDispatching}, To: ReasonProvisioningFallback},
	},
}

// Acquiring reports whether a Pending job with this Reason holds its queue's
// slot: it was picked and is getting a node pool or being submitted. It is
// the one definition the resource manager, the store (which stamps
// dispatched_at when acquiring begins) and status propagation share.
func Acquiring(r Reason) bool {
	switch r {
	case ReasonWaitingForPool, ReasonProvisioning, ReasonProvisioningFallback, ReasonDispatching:
		return true
	}
	return false
}

// PoolState is where a node pool is in its life, as its provider reports it.
type PoolState string

const (
	PoolProvisioning PoolState = "Provisioning"
	PoolReady        PoolState = "Ready"
	PoolFailed       PoolState = "Failed"
	PoolDeleting     PoolState = "Deleting"
	// PoolGone is a pool the provider no longer lists: deleted.
	PoolGone PoolState = "Gone"
)

// PoolStates is a node pool's life. A pool is created Provisioning; it
// becomes Ready or Failed; any pool may be deleted, and a deletion may fail
// back into Failed (GKE reports ERROR) to be retried. Who owns a pool is not
// a state: it is read from the jobs each cycle (their node_pool).
var PoolStates = Table[PoolState]{
	Name:    "node pool",
	Initial: PoolProvisioning,
	Transitions: []Step[PoolState]{
		{From: []PoolState{PoolProvisioning}, To: PoolProvisioning},
		{From: []PoolState{PoolProvisioning, PoolReady}, To: PoolReady},
		{From: []PoolState{PoolProvisioning, PoolReady, PoolFailed, PoolDeleting}, To: PoolFailed},
		{From: []PoolState{PoolProvisioning, PoolReady, PoolFailed, PoolDeleting}, To: PoolDeleting},
		{From: []PoolState{PoolProvisioning, PoolReady, PoolFailed, PoolDeleting}, To: PoolGone},
	},
}

// Usable reports whether a pool in state s can still serve a job: it is
// ready, or on its way to being ready.
func (s PoolState) Usable() bool { return s == PoolReady || s == PoolProvisioning }

// Deletable reports whether the resource manager may start deleting a pool
// in state s: every state may move to Deleting, but one already Deleting is
// not asked again.
func (s PoolState) Deletable() bool { return s != PoolDeleting && PoolStates.Can(s, PoolDeleting) }
