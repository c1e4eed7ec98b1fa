package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/accelerator"
)

// Job is one line of a trace: a job submitted at T by User that needs Hosts
// hosts of Accelerator in Topology and runs for Duration once dispatched.
type Job struct {
	T           time.Time
	User        string
	Accelerator string // canonical name (v5p, v7x)
	Topology    string // lower case, as node pools are labelled
	Hosts       int
	Duration    time.Duration
	// SupplyMode "flex-start" creates the job's pool with flex-start even
	// when the reservation has room; "" or "reservation" follows 000's rule.
	SupplyMode string
	// Cluster pins the job to one cluster ("" lets selection choose).
	Cluster string
	// PoolCreate, when set, is how long a pool created for this job takes
	// to become ready, instead of a draw from its cluster's distribution
	// (a replayed history knows it; the fidelity test needs it).
	PoolCreate time.Duration
}

// traceLine is a trace line as written.
type traceLine struct {
	T           string `json:"t"`
	User        string `json:"user"`
	Accelerator string `json:"accelerator"`
	Topology    string `json:"topology"`
	Hosts       int    `json:"hosts"`
	Duration    string `json:"duration"`
	SupplyMode  string `json:"supply_mode,omitempty"`
	Cluster     string `json:"cluster,omitempty"`
	PoolCreate  string `json:"pool_create,omitempty"`
}

// LineError is a trace line refused: its number (from 1), the field at
// fault, and why.
type LineError struct {
	Line  int
	Field string
	Msg   string
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("trace line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("trace line %d: %s: %s", e.Line, e.Field, e.Msg)
}

// ParseTrace reads a trace of JSON lines. Blank lines and lines starting
// with # are skipped. Lines must be in time order (equal times keep the
// file's order). The first bad line is refused with its number and field.
func ParseTrace(r io.Reader) ([]Job, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var out []Job
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		j, err := parseLine(line, n)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && j.T.Before(out[len(out)-1].T) {
			return nil, &LineError{n, "t", fmt.Sprintf("%s is before the previous line's %s: a trace is in time order", j.T.Format(time.RFC3339), out[len(out)-1].T.Format(time.RFC3339))}
		}
		out = append(out, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the trace has no jobs")
	}
	return out, nil
}

func parseLine(line []byte, n int) (Job, error) {
	var l traceLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		msg := err.Error()
		if strings.HasPrefix(msg, "json: unknown field ") {
			field = strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
			msg = "unknown field; allowed: t, user, accelerator, topology, hosts, duration, supply_mode, cluster, pool_create"
		}
		return Job{}, &LineError{n, field, msg}
	}
	bad := func(field, format string, args ...any) (Job, error) {
		return Job{}, &LineError{n, field, fmt.Sprintf(format, args...)}
	}
	var j Job
	var err error
	if l.T == "" {
		return bad("t", "missing (RFC 3339, e.g. 2026-01-05T09:30:00Z)")
	}
	if j.T, err = time.Parse(time.RFC3339, l.T); err != nil {
		return bad("t", "%q is not an RFC 3339 time (e.g. 2026-01-05T09:30:00Z)", l.T)
	}
	if j.User = strings.TrimSpace(l.User); j.User == "" {
		return bad("user", "missing")
	}
	if l.Accelerator == "" {
		return bad("accelerator", "missing (a TPU type such as v5p or v7x)")
	}
	spec, err := accelerator.Lookup(l.Accelerator)
	if err != nil {
		return bad("accelerator", "%v", err)
	}
	if spec.Kind != accelerator.KindTPU {
		return bad("accelerator", "%s is a %s type; the simulator models TPU node pools only", spec.Name, spec.Kind)
	}
	if l.Hosts <= 0 {
		return bad("hosts", "must be at least 1")
	}
	if l.Topology == "" {
		return bad("topology", "missing (e.g. %s)", spec.HostTopology)
	}
	sl, err := spec.Slice(l.Topology, l.Hosts, 0)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "replica") {
			// The accelerator table speaks of a task's replica; a trace
			// line's is hosts.
			return bad("hosts", "%s", strings.ReplaceAll(strings.ReplaceAll(msg, "replica: ", ""), "replica", "hosts"))
		}
		return bad("topology", "%s", strings.ReplaceAll(msg, "device_topo: ", ""))
	}
	j.Accelerator, j.Topology, j.Hosts = spec.Name, strings.ToLower(sl.Topology), sl.Hosts
	if l.Duration == "" {
		return bad("duration", "missing (e.g. 45m)")
	}
	if j.Duration, err = time.ParseDuration(l.Duration); err != nil || j.Duration <= 0 {
		return bad("duration", "%q is not a positive duration (e.g. 45m, 1h30m)", l.Duration)
	}
	switch l.SupplyMode {
	case "", "reservation", "flex-start":
		j.SupplyMode = l.SupplyMode
	default:
		return bad("supply_mode", "%q: allowed values are reservation and flex-start", l.SupplyMode)
	}
	j.Cluster = l.Cluster
	if l.PoolCreate != "" {
		if j.PoolCreate, err = time.ParseDuration(l.PoolCreate); err != nil || j.PoolCreate < 0 {
			return bad("pool_create", "%q is not a duration (e.g. 7m30s)", l.PoolCreate)
		}
	}
	return j, nil
}

// WriteTrace writes jobs as JSON lines, one per job.
func WriteTrace(w io.Writer, jobs []Job) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, j := range jobs {
		l := traceLine{
			T: j.T.UTC().Format(time.RFC3339), User: j.User, Accelerator: j.Accelerator, Topology: j.Topology,
			Hosts: j.Hosts, Duration: j.Duration.String(), SupplyMode: j.SupplyMode, Cluster: j.Cluster,
		}
		if j.PoolCreate > 0 {
			l.PoolCreate = j.PoolCreate.String()
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return bw.Flush()
}
