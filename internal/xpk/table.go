package xpk

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The columns of xpk's workload list, in the order it prints them. Older
// releases add others (TPU Slice Dimensions), which are skipped.
const (
	colName       = "Jobset Name"
	colCreated    = "Created Time"
	colPriority   = "Priority"
	colNeeded     = "TPU VMs Needed"
	colRunning    = "TPU VMs Running/Ran"
	colDone       = "TPU VMs Done"
	colStatus     = "Status"
	colMessage    = "Status Message"
	colStatusTime = "Status Time"
)

var required = []string{colName, colCreated, colPriority, colNeeded, colRunning, colDone, colStatus, colMessage, colStatusTime}

// outputMarker is the line xpk prints before the table.
const outputMarker = "[XPK] Workload List Output:"

// ParseList reads the workloads out of what `xpk workload list` printed on
// stdout: xpk's own log lines ([XPK] ...), the marker line, the table (none
// at all, or a header alone, when the cluster has no workloads), more log
// lines. Anything else is a *OutputError naming what was wrong.
func ParseList(cluster, stdout string) ([]WorkloadInfo, error) {
	fail := func(detail string) error { return &OutputError{Cluster: cluster, Detail: detail, Output: stdout} }
	lines := strings.Split(strings.ReplaceAll(stdout, "\r\n", "\n"), "\n")
	start := -1
	for i, l := range lines {
		// A line xpk rewrites in place ends in \r; the marker starts a line.
		if l = lastSegment(l); strings.HasPrefix(l, outputMarker) {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, fail("it has no line " + strconv.Quote(outputMarker))
	}
	var table []string
	for _, l := range lines[start:] {
		if strings.HasPrefix(l, "[XPK]") {
			break
		}
		if strings.TrimSpace(l) != "" {
			table = append(table, strings.TrimRight(l, " \r"))
		}
	}
	if len(table) == 0 {
		return nil, nil
	}
	cols, err := header(table[0])
	if err != "" {
		return nil, fail(err)
	}
	out := make([]WorkloadInfo, 0, len(table)-1)
	for n, row := range table[1:] {
		vals, err := cells(row, cols)
		if err != "" {
			return nil, fail("row " + strconv.Itoa(n+1) + " " + err)
		}
		out = append(out, info(vals))
	}
	return out, nil
}

func lastSegment(l string) string {
	if i := strings.LastIndexByte(l, '\r'); i >= 0 {
		return l[i+1:]
	}
	return l
}

type column struct {
	name  string
	start int // in runes
}

// header finds where every column starts: names hold single spaces, and
// columns are separated by at least two.
func header(h string) ([]column, string) {
	r := []rune(h)
	var cols []column
	for i := 0; i < len(r); {
		if r[i] == ' ' {
			i++
			continue
		}
		j := i
		for j < len(r) && !(r[j] == ' ' && (j+1 >= len(r) || r[j+1] == ' ')) {
			j++
		}
		cols = append(cols, column{name: string(r[i:j]), start: i})
		i = j
	}
	have := map[string]bool{}
	for _, c := range cols {
		have[c.name] = true
	}
	var missing []string
	for _, c := range required {
		if !have[c] {
			missing = append(missing, strconv.Quote(c))
		}
	}
	if len(missing) > 0 {
		return nil, "its table header " + strconv.Quote(h) + " lacks the column(s) " + strings.Join(missing, ", ")
	}
	return cols, ""
}

// cells cuts a row at the header's column starts. A value must start
// where its header does: the rune before each start is padding.
func cells(row string, cols []column) (map[string]string, string) {
	if !utf8.ValidString(row) {
		return nil, "is not UTF-8"
	}
	r := []rune(row)
	out := map[string]string{}
	for i, c := range cols {
		if c.start >= len(r) {
			out[c.name] = ""
			continue
		}
		if c.start > 0 && r[c.start-1] != ' ' {
			return nil, strconv.Quote(row) + " does not line up with the header at column " + strconv.Quote(c.name)
		}
		end := len(r)
		if i+1 < len(cols) && cols[i+1].start < end {
			end = cols[i+1].start
		}
		out[c.name] = strings.TrimSpace(string(r[c.start:end]))
	}
	if out[colName] == "" {
		return nil, strconv.Quote(row) + " has no Jobset Name"
	}
	return out, ""
}

func info(v map[string]string) WorkloadInfo {
	w := WorkloadInfo{
		Name: v[colName], CreatedTime: v[colCreated], Priority: v[colPriority],
		VMsNeeded: count(v[colNeeded]), VMsRunning: count(v[colRunning]), VMsDone: count(v[colDone]),
		Status: v[colStatus], StatusMessage: v[colMessage], StatusTime: v[colStatusTime],
	}
	w.StartTime = timeOf(w.CreatedTime)
	w.State = StateOf(w.Status, w.StatusMessage, w.VMsRunning)
	return w
}

// StateOf maps a row's Status, Status Message and VMs running (-1 for
// <none>) as xpk's --filter-by-status does.
func StateOf(status, message string, running int) State {
	switch {
	case (status == "Admitted" || status == "Evicted") && running > 0:
		return StateRunning
	case status == "Admitted" || status == "Evicted" || status == "QuotaReserved":
		return StateQueued
	case status == "Finished" && strings.Contains(message, "failed"):
		return StateFailed
	case status == "Finished" && strings.Contains(message, "finished"):
		return StateCompleted
	}
	return StateUnknown
}

// count reads a VM count; -1 for <none> or anything else xpk's _safe_int
// would not read.
func count(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func timeOf(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil
	}
	return &t
}
