package lifecycle

import (
	"errors"
	"fmt"
	"testing"
)

// legal lists every legal (from, to) pair per machine, written out by hand
// from the design so the test does not re-derive the table it checks.
var legal = map[Kind]map[[2]Status]bool{
	KindJob: {
		{Pending, Pending}: true, {Running, Running}: true, {Aborting, Aborting}: true,
		{Pending, Running}: true, {Running, Succeeded}: true,
		{Pending, Failed}: true, {Running, Failed}: true,
		{Pending, Aborting}: true, {Running, Aborting}: true, {Aborting, Aborted}: true,
	},
	KindExperiment: {
		{Created, Created}: true, {Running, Running}: true, {Aborting, Aborting}: true,
		{Created, Running}: true, {Running, Succeeded}: true,
		{Created, Failed}: true, {Running, Failed}: true,
		{Created, Aborting}: true, {Running, Aborting}: true, {Aborting, Aborted}: true,
	},
	KindArtifact: {
		{Created, Created}:   true,
		{Created, Succeeded}: true, {Created, Failed}: true,
	},
}

var allStatuses = []Status{Pending, Created, Running, Succeeded, Failed, Aborting, Aborted, "", "pending", "Bogus"}

func TestTransitionTablesExhaustive(t *testing.T) {
	for _, m := range []Machine{JobMachine, ExperimentMachine, ArtifactMachine} {
		for _, from := range allStatuses {
			for _, to := range allStatuses {
				want := legal[m.Kind][[2]Status{from, to}]
				t.Run(fmt.Sprintf("%s/%s->%s", m.Kind, from, to), func(t *testing.T) {
					if got := m.Can(from, to); got != want {
						t.Fatalf("Can(%q, %q) = %v, want %v", from, to, got, want)
					}
					err := m.Check(from, to)
					if want != (err == nil) {
						t.Fatalf("Check(%q, %q) = %v, want legal=%v", from, to, err, want)
					}
					var ite *IllegalTransitionError
					if err != nil && !errors.As(err, &ite) {
						t.Fatalf("Check error %T is not *IllegalTransitionError", err)
					}
				})
			}
		}
	}
}

func TestTerminal(t *testing.T) {
	tests := []struct {
		m    Machine
		want []Status
	}{
		{JobMachine, []Status{Succeeded, Failed, Aborted}},
		{ExperimentMachine, []Status{Succeeded, Failed, Aborted}},
		{ArtifactMachine, []Status{Succeeded, Failed}},
	}
	for _, tt := range tests {
		for _, s := range tt.m.Statuses() {
			want := false
			for _, w := range tt.want {
				want = want || w == s
			}
			if got := tt.m.IsTerminal(s); got != want {
				t.Errorf("%s.IsTerminal(%s) = %v, want %v", tt.m.Kind, s, got, want)
			}
			// A terminal status has no way out; a non-terminal one has at least one.
			out := 0
			for _, to := range tt.m.Statuses() {
				if to != s && tt.m.Can(s, to) {
					out++
				}
			}
			if want != (out == 0) {
				t.Errorf("%s: %s terminal=%v but has %d exits", tt.m.Kind, s, want, out)
			}
		}
	}
}

func TestStatusesAreExactNames(t *testing.T) {
	want := map[Status]string{Pending: "Pending", Created: "Created", Running: "Running",
		Succeeded: "Succeeded", Failed: "Failed", Aborting: "Aborting", Aborted: "Aborted"}
	for s, name := range want {
		if string(s) != name {
			t.Errorf("status %q, want %q", s, name)
		}
	}
}

// Valid knows exactly the statuses Statuses lists, and allocates nothing:
// every status write checks its transition with it.
func TestValidIsStatusesWithoutAllocating(t *testing.T) {
	for _, m := range []Machine{JobMachine, ExperimentMachine, ArtifactMachine, AnalysisMachine} {
		for _, s := range m.Statuses() {
			if !m.Valid(s) {
				t.Errorf("%s: Valid(%s) = false for a status Statuses lists", m.Kind, s)
			}
		}
		for _, s := range []Status{"", "Done", "pending"} {
			if m.Valid(s) {
				t.Errorf("%s: Valid(%q) = true", m.Kind, s)
			}
		}
		if n := testing.AllocsPerRun(100, func() { m.Valid(m.Terminal[len(m.Terminal)-1]) }); n != 0 {
			t.Errorf("%s: Valid allocates %v times a call, want 0", m.Kind, n)
		}
	}
}
