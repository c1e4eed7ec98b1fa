package progress

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/testenv/syncbuf"
)

func TestLine(t *testing.T) {
	var out syncbuf.Buffer
	var n atomic.Int64
	l := Start(&out, time.Millisecond, func() string { return "done " + strings.Repeat("#", int(n.Load())) })
	// Drawn on its ticks, in place.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "\r\033[Kdone ") {
		if time.Now().After(deadline) {
			t.Fatalf("never drawn: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	// A notice goes above it, on a line of its own.
	if _, err := l.Write([]byte("resuming\n")); err != nil {
		t.Fatal(err)
	}
	n.Store(3)
	l.Stop()
	l.Stop()
	got := out.String()
	if !strings.Contains(got, "\r\033[Kresuming\n") {
		t.Errorf("the notice did not clear the line first: %q", got)
	}
	if !strings.HasSuffix(got, "\r\033[Kdone ###\n") {
		t.Errorf("not left at its last state, ended: %q", got)
	}
	if after := out.String(); after != got {
		t.Errorf("drawn after Stop: %q", after[len(got):])
	}
}

// A Line with nothing to show draws nothing, even when stopped.
func TestEmptyLineDrawsNothing(t *testing.T) {
	var out syncbuf.Buffer
	var ticks atomic.Int64
	l := Start(&out, time.Millisecond, func() string { ticks.Add(1); return "" })
	deadline := time.Now().Add(10 * time.Second)
	for ticks.Load() < 5 { // five ticks asked for the text
		if time.Now().After(deadline) {
			t.Fatal("the text was never asked for")
		}
		time.Sleep(time.Millisecond)
	}
	l.Stop()
	if got := out.String(); got != "" {
		t.Errorf("drew %q", got)
	}
}
