package lifecycle

import (
	"fmt"
	"testing"
)

// The legal moves, written out by hand from 000's phases so the test does
// not re-derive the tables it checks.
var (
	legalPending = map[[2]Reason]bool{
		{ReasonWaiting, ReasonWaiting}:      true,
		{ReasonWaiting, ReasonProvisioning}: true, {ReasonWaiting, ReasonProvisioningFallback}: true, {ReasonWaiting, ReasonDispatching}: true,
		{ReasonProvisioning, ReasonProvisioning}: true, {ReasonProvisioning, ReasonDispatching}: true,
		{ReasonProvisioningFallback, ReasonProvisioningFallback}: true, {ReasonProvisioningFallback, ReasonProvisioning}: true,
		{ReasonProvisioningFallback, ReasonDispatching}: true,
		{ReasonDispatching, ReasonDispatching}:          true,
		// The pool cap.
		{ReasonWaiting, ReasonWaitingForPool}: true, {ReasonWaitingForPool, ReasonWaitingForPool}: true,
		{ReasonWaitingForPool, ReasonProvisioning}: true, {ReasonWaitingForPool, ReasonProvisioningFallback}: true,
		{ReasonWaitingForPool, ReasonDispatching}: true,
		// A pick is recorded as Dispatching; a job that needs a pool then gets one.
		{ReasonDispatching, ReasonWaitingForPool}: true, {ReasonDispatching, ReasonProvisioning}: true,
		{ReasonDispatching, ReasonProvisioningFallback}: true,
		// A pick taken ahead: it waits for the slot, then is recorded as
		// Dispatching; never back to Waiting, never to a pool phase
		// (only jobs that need no pool are picked ahead).
		{ReasonWaiting, ReasonNext}: true, {ReasonNext, ReasonNext}: true, {ReasonNext, ReasonDispatching}: true,
	}
	legalPool = map[[2]PoolState]bool{
		{PoolProvisioning, PoolProvisioning}: true, {PoolProvisioning, PoolReady}: true, {PoolReady, PoolReady}: true,
	}
)

func init() {
	for _, from := range []PoolState{PoolProvisioning, PoolReady, PoolFailed, PoolDeleting} {
		for _, to := range []PoolState{PoolFailed, PoolDeleting, PoolGone} {
			legalPool[[2]PoolState{from, to}] = true
		}
	}
}

func TestPendingPhasesExhaustive(t *testing.T) {
	all := append(append([]Reason{}, PendingReasons...), FailedReasons...)
	all = append(all, "", "waiting")
	for _, from := range all {
		for _, to := range all {
			want := legalPending[[2]Reason{from, to}]
			if got := PendingPhases.Can(from, to); got != want {
				t.Errorf("PendingPhases.Can(%q, %q) = %v, want %v", from, to, got, want)
			}
			if err := PendingPhases.Check(from, to); (err == nil) != want {
				t.Errorf("PendingPhases.Check(%q, %q) = %v", from, to, err)
			}
		}
	}
}

func TestPendingPhasesCoverEveryPendingReason(t *testing.T) {
	states := PendingPhases.States()
	if fmt.Sprint(states) != fmt.Sprint(PendingReasons) {
		t.Errorf("PendingPhases.States() = %v, want PendingReasons %v", states, PendingReasons)
	}
}

func TestAcquiring(t *testing.T) {
	for _, r := range append(append([]Reason{}, PendingReasons...), FailedReasons...) {
		want := r == ReasonWaitingForPool || r == ReasonProvisioning || r == ReasonProvisioningFallback || r == ReasonDispatching
		if got := Acquiring(r); got != want {
			t.Errorf("Acquiring(%s) = %v, want %v", r, got, want)
		}
	}
}

func TestPoolStatesExhaustive(t *testing.T) {
	all := []PoolState{PoolProvisioning, PoolReady, PoolFailed, PoolDeleting, PoolGone, "RUNNING"}
	for _, from := range all {
		for _, to := range all {
			want := legalPool[[2]PoolState{from, to}]
			if got := PoolStates.Can(from, to); got != want {
				t.Errorf("PoolStates.Can(%q, %q) = %v, want %v", from, to, got, want)
			}
		}
	}
	tests := []struct {
		s                 PoolState
		usable, deletable bool
	}{
		{PoolProvisioning, true, true}, {PoolReady, true, true}, {PoolFailed, false, true},
		{PoolDeleting, false, false}, {PoolGone, false, false},
	}
	for _, tt := range tests {
		if tt.s.Usable() != tt.usable || tt.s.Deletable() != tt.deletable {
			t.Errorf("%s: Usable %v Deletable %v, want %v %v", tt.s, tt.s.Usable(), tt.s.Deletable(), tt.usable, tt.deletable)
		}
	}
}
