package lifecycle

import (
	"time"

	"fmt"
	"slices"
)

// Status is the coarse state of a Job, Experiment or Artifact. The string
// values are part of the public API: scripts compare them, so they never change.
type Status string

const (
	Pending   Status = "Pending"
	Created   Status = "Created"
	Running   Status = "Running"
	Succeeded Status = "Succeeded"
	Failed    Status = "Failed"
	Aborting  Status = "Aborting"
	Aborted   Status = "Aborted"
)

// Kind names the entity whose lifecycle a Machine describes.
type Kind string

const (
	KindJob        Kind = "job"
	KindExperiment Kind = "experiment"
	KindArtifact   Kind = "artifact"
)

// Transition is one row of a transition table: any of Sources may move to Destination.
type Transition struct {
	Sources     []Status
	Destination Status
}

// Machine is a lifecycle: its initial status, its terminal statuses and the
// legal transitions between statuses. A status may always "move" to itself
// (a same-status update changes only Reason and Message), which lets a
// controller report progress such as Waiting -> Provisioning while Pending.
type Machine struct {
	Kind        Kind
	Initial     Status
	Terminal    []Status
	Transitions []Transition
}

// JobMachine: Pending -> Running -> Succeeded/Failed; a job can fail in any
// phase (node pool, submit, timeout); any non-terminal job can be aborted.
var JobMachine = Machine{
	Kind:     KindJob,
	Initial:  Pending,
	Terminal: []Status{Succeeded, Failed, Aborted},
	Transitions: []Transition{
		{Sources: []Status{Pending}, Destination: Running},
		{Sources: []Status{Running}, Destination: Succeeded},
		{Sources: []Status{Pending, Running}, Destination: Failed},
		{Sources: []Status{Pending, Running}, Destination: Aborting},
		{Sources: []Status{Aborting}, Destination: Aborted},
	},
}

// ExperimentMachine: Created -> Running -> Succeeded/Failed; an experiment
// whose job fails before it ever ran goes straight from Created to Failed;
// AbortExp moves any non-terminal experiment to Aborting.
var ExperimentMachine = Machine{
	Kind:     KindExperiment,
	Initial:  Created,
	Terminal: []Status{Succeeded, Failed, Aborted},
	Transitions: []Transition{
		{Sources: []Status{Created}, Destination: Running},
		{Sources: []Status{Running}, Destination: Succeeded},
		{Sources: []Status{Created, Running}, Destination: Failed},
		{Sources: []Status{Created, Running}, Destination: Aborting},
		{Sources: []Status{Aborting}, Destination: Aborted},
	},
}

// ArtifactMachine: Created -> Succeeded/Failed.
var ArtifactMachine = Machine{
	Kind:     KindArtifact,
	Initial:  Created,
	Terminal: []Status{Succeeded, Failed},
	Transitions: []Transition{
		{Sources: []Status{Created}, Destination: Succeeded},
		{Sources: []Status{Created}, Destination: Failed},
	},
}

// Statuses lists every status the machine knows, in a stable order.
func (m Machine) Statuses() []Status {
	seen := []Status{m.Initial}
	add := func(s Status) {
		if !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	for _, t := range m.Transitions {
		for _, s := range t.Sources {
			add(s)
		}
		add(t.Destination)
	}
	return seen
}

// Valid reports whether s is a status of this machine. It allocates
// nothing: every status write checks its transition (Can).
func (m Machine) Valid(s Status) bool {
	if s == m.Initial {
		return true
	}
	for _, t := range m.Transitions {
		if t.Destination == s || slices.Contains(t.Sources, s) {
			return true
		}
	}
	return false
}

// IsTerminal reports whether s is a terminal status of this machine.
func (m Machine) IsTerminal(s Status) bool { return slices.Contains(m.Terminal, s) }

// NonTerminal lists the statuses from which the entity can still move.
func (m Machine) NonTerminal() []Status {
	var out []Status
	for _, s := range m.Statuses() {
		if !m.IsTerminal(s) {
			out = append(out, s)
		}
	}
	return out
}

// Can reports whether from -> to is legal. Staying in a non-terminal status
// is legal (progress updates); staying in a terminal status is not, so a
// finished entity's Reason and Message are never rewritten.
func (m Machine) Can(from, to Status) bool {
	if !m.Valid(from) || !m.Valid(to) {
		return false
	}
	if from == to {
		return !m.IsTerminal(from)
	}
	for _, t := range m.Transitions {
		if t.Destination == to && slices.Contains(t.Sources, from) {
			return true
		}
	}
	return false
}

// Check returns an *IllegalTransitionError when from -> to is not legal.
func (m Machine) Check(from, to Status) error {
	if m.Can(from, to) {
		return nil
	}
	return &IllegalTransitionError{Kind: m.Kind, From: from, To: to}
}

// IllegalTransitionError is returned for a move the table does not allow.
type IllegalTransitionError struct {
	Kind     Kind
	From, To Status
}

func (e *IllegalTransitionError) Error() string {
	if e.From == e.To {
		return fmt.Sprintf("%s is already %s", e.Kind, e.From)
	}
	return fmt.Sprintf("illegal %s transition %s -> %s", e.Kind, e.From, e.To)
}

// TTLWarning is how long before an experiment's ttl ends that its warning
// is given: time to extend it, or to copy out what is needed.
const TTLWarning = 10 * time.Minute

// KindAnalysis names analyses in errors.
const KindAnalysis Kind = "analysis"

// AnalysisMachine: Pending -> Running -> Succeeded/Failed. A Running
// analysis whose controller stopped is claimed again while Running (the
// self-move every machine allows), so none is left stuck.
var AnalysisMachine = Machine{
	Kind:     KindAnalysis,
	Initial:  Pending,
	Terminal: []Status{Succeeded, Failed},
	Transitions: []Transition{
		{Sources: []Status{Pending}, Destination: Running},
		{Sources: []Status{Running}, Destination: Succeeded},
		{Sources: []Status{Pending, Running}, Destination: Failed},
	},
}
