package e2e

import (
	"cmp"
	"fmt"
	"os"
	"slices"
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

// busyMSPerJob is the machine's busy CPU time between a and b, every
// process's, in milliseconds per job of the n run then; 0 if either
// reading failed. /proc/stat counts in USER_HZ, which Linux fixes at 100
// a second for every program that reads it.
func busyMSPerJob(a, b cpuTicks, n int) float64 {
	if a.total == 0 || b.total <= a.total || n == 0 {
		return 0
	}
	return 1000 * (b.busy - a.busy) / 100 / float64(n)
}

// procCPU is each program's CPU time so far (user and system, in ticks of
// USER_HZ), summed over its processes by the name the kernel gives them
// (/proc/PID/stat's comm: "kube-apiserver", "etcd", "falcon", the test
// binary...). Nil where there is no /proc. A process that ends between two
// readings takes its time with it: the benchmarks read it around phases
// whose processes all live through them.
func procCPU() map[string]float64 {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses,
		// so the fields are counted from the last ')'.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 { // utime and stime are the 12th and 13th after comm
			continue
		}
		u, err1 := strconv.ParseFloat(f[11], 64)
		st, err2 := strconv.ParseFloat(f[12], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out[s[open+1:end]] += u + st
	}
	return out
}

// printCPU prints each program's CPU time between a and b in milliseconds
// per job of the n run then, the busiest first.
func printCPU(label string, a, b map[string]float64, n int) {
	if a == nil || b == nil || n == 0 {
		return
	}
	var names []string
	total := 0.0
	for name := range b {
		if b[name]-a[name] > 0 {
			names = append(names, name)
			total += b[name] - a[name]
		}
	}
	slices.SortFunc(names, func(x, y string) int { return cmp.Compare(b[y]-a[y], b[x]-a[x]) })
	fmt.Printf("CPU per job, %s (ms; every process's, by program): %.1f in all\n", label, 1000*total/100/float64(n))
	for _, name := range names {
		if ms := 1000 * (b[name] - a[name]) / 100 / float64(n); ms >= 0.1 {
			fmt.Printf("  %-24s %8.1f\n", name, ms)
		}
	}
}
