package resourcemanager_test

import (
	"context"
	"testing"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// endsRun is two Running jobs under Run, a cycle stuck on its batched
// write: the report of the second's news started it.
func endsRun(t *testing.T) (d *deckRun, ended, other string) {
	t.Helper()
	d = startDeck(t, apitest.Start(t, map[string]string{"local": "test"}), newScripted())
	task := map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}
	ended = d.env.Create(t, "ended", task).GetJobs()[0].GetId()
	other = d.env.Create(t, "other", task).GetJobs()[0].GetId()
	d.waitJob(t, ended, "Running", "", "")
	d.waitJob(t, other, "Running", "", "")
	// The cycles that recorded them Running have armed ends.
	waitQuiet(t, d.reg)
	d.gate.holdBatches()
	d.be.set(other, resourcemanager.PhaseRunning, "1/1 running, 1 restart")
	d.touch(other)
	waitFor(t, "a cycle stuck on its write", func() bool { return d.gate.blocked.Load() > 0 })
	return d, ended, other
}

// A Running job's success is recorded the moment its backend reports it,
// though the cycle in flight is stuck on its write; the cycle that follows
// folds the row and writes nothing more for it.
func TestAnEndIsRecordedBeforeAnyCycle(t *testing.T) {
	d, ended, other := endsRun(t)
	d.be.set(ended, resourcemanager.PhaseSucceeded, "exit 0")
	d.touch(ended)
	d.waitJob(t, ended, "Succeeded", "", "exit 0")
	if d.gate.blocked.Load() == 0 {
		t.Fatal("the cycle's write passed before the end was recorded; the test shows nothing")
	}
	// Counted once the write has returned, a moment after it is visible.
	waitFor(t, "the end counted as recorded ahead", func() bool { return metric(t, d.reg, "falcon_rm_ends_ahead_total") == 1 })
	d.gate.pass()
	d.waitJob(t, other, "Running", "", "1/1 running, 1 restart")
	waitQuiet(t, d.reg)
	if j := d.env.Job(t, ended); j.GetStatus() != "Succeeded" || j.GetMessage() != "exit 0" {
		t.Errorf("after the cycles, the ended job is %s %q", j.GetStatus(), j.GetMessage())
	}
	if got := metric(t, d.reg, "falcon_rm_ends_ahead_total"); got != 1 {
		t.Errorf("falcon_rm_ends_ahead_total = %v after the cycles, want 1", got)
	}
}

// A user's abort that lands before the end is reported wins: the end's
// write is refused, and the cycle carries the abort out.
func TestAnAbortBeatsTheEnd(t *testing.T) {
	d, ended, _ := endsRun(t)
	j := d.env.Job(t, ended)
	if _, err := d.env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: j.GetExpId(), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	d.be.set(ended, resourcemanager.PhaseSucceeded, "exit 0")
	d.touch(ended)
	waitFor(t, "the end's write refused", func() bool { return d.gate.refused.Load() > 0 })
	if j := d.env.Job(t, ended); j.GetStatus() != "Aborting" {
		t.Fatalf("the job is %s while the cycle is stuck, want the user's Aborting", j.GetStatus())
	}
	d.gate.pass()
	d.waitJob(t, ended, "Aborted", "", "")
	if got := metric(t, d.reg, "falcon_rm_ends_ahead_total"); got != 0 {
		t.Errorf("falcon_rm_ends_ahead_total = %v, want 0: the abort came first", got)
	}
	d.be.mu.Lock()
	defer d.be.mu.Unlock()
	if d.be.stopped[ended] == 0 {
		t.Error("the aborted job was never stopped on its cluster")
	}
}
