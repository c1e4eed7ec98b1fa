package e2e

import (
	"os"
	"strconv"
	"strings"
)

// cpuTicks is the machine's CPU time so far, in ticks of /proc/stat: busy
// and in all. The dispatch benchmarks read it around each phase, because
// their baseline is what the clusters get out of the machine: a phase
// that keeps every core busy is limited by CPU, and then whatever Falcon
// spends is taken from the clusters.
type cpuTicks struct{ busy, total float64 }

// machineTicks reads /proc/stat's first line; zero where there is none.
func machineTicks() cpuTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}
	}
	// user nice system idle iowait irq softirq steal; guest time is
	// counted in user already.
	var t cpuTicks
	for i, s := range f[1:9] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return cpuTicks{}
		}
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// busyPercent is the share of the machine's CPU time between a and b that
// was busy; 0 if either reading failed.
func busyPercent(a, b cpuTicks) float64 {
	if a.total == 0 || b.total <= a.total {
		return 0
	}
	return 100 * (b.busy - a.busy) / (b.total - a.total)
}
