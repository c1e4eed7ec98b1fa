package podlogs

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/provider/kube/render"
)

// Line is one line of a pod's output, without its newline.
type Line struct {
	Pod  string // pod name; for a bucket object, the object's base name without .log
	Role string // the pod's falcon.dev/role label, "" if it has none (always "" from the bucket)
	Rank int    // completion index, -1 if neither label, annotation nor name tells
	// Time is the kubelet's timestamp of the line, always set for pod logs
	// (the reader always asks for timestamps, since resuming needs them;
	// showing them is the caller's choice) and zero for bucket objects.
	Time time.Time
	// Seq is the line's place, from 1, among the pod's lines that carry
	// exactly Time. With Time it is the line's position (see Cursor).
	Seq int
	// Offset is, for a bucket object, the byte offset just past the line,
	// where a resumed read starts; 0 for pod logs.
	Offset int64
	Text   string
}

// Position is where a pod's log was read up to: the last line delivered.
type Position struct {
	Time   time.Time `json:"time,omitzero"`
	Seq    int       `json:"seq,omitempty"`
	Offset int64     `json:"offset,omitempty"`
}

// Cursor holds the position of the last line delivered of each pod, to hand
// to Options.Resume when reading again. It encodes as JSON (a map of pod
// name to position), so an API server can give it to a client as a resume
// token and get it back after a restart.
type Cursor map[string]Position

// Advance records l as delivered.
func (c Cursor) Advance(l Line) { c[l.Pod] = Position{Time: l.Time, Seq: l.Seq, Offset: l.Offset} }

// Options select and shape what is read. The zero value reads every pod's
// whole log once.
type Options struct {
	// Ranks keeps only pods of these ranks; empty keeps all.
	Ranks []int
	// Since keeps lines stamped at or after it (pod logs only: bucket
	// objects have no timestamps, and FromBucket refuses it).
	Since time.Time
	// Tail keeps only the last Tail lines of each pod that pass Grep; 0 keeps
	// all.
	Tail int
	// Grep keeps lines matching this RE2 expression (Go's regexp syntax); ""
	// keeps all.
	Grep string
	// Follow keeps reading as pods write, until they end (see the package
	// documentation); FromBucket reads finished logs and ignores it.
	Follow bool
	// Resume continues after the positions in it, per pod: lines at or before
	// a pod's position are not delivered again, and Tail does not apply to
	// that pod.
	Resume Cursor
	// Container is the container whose log is read; the default is Falcon's
	// task container (render.ContainerName).
	Container string
}

// compiled is Options checked, with Grep compiled.
type compiled struct {
	Options
	grep  *regexp.Regexp
	ranks map[int]bool
}

func (o Options) compile() (*compiled, error) {
	var errs errdefs.FieldErrors
	c := &compiled{Options: o}
	if o.Tail < 0 {
		errs.Add("tail", "must not be negative, got %d", o.Tail)
	}
	for _, r := range o.Ranks {
		if r < 0 {
			errs.Add("ranks", "must not be negative, got %d", r)
			continue
		}
		if c.ranks == nil {
			c.ranks = map[int]bool{}
		}
		c.ranks[r] = true
	}
	if o.Grep != "" {
		re, err := regexp.Compile(o.Grep)
		if err != nil {
			errs.Add("grep", "not an RE2 expression: %v", err)
		}
		c.grep = re
	}
	if c.Container == "" {
		c.Container = render.ContainerName
	}
	return c, errs.Err()
}

func (c *compiled) wantRank(rank int) bool { return c.ranks == nil || c.ranks[rank] }

func (c *compiled) match(text string) bool { return c.grep == nil || c.grep.MatchString(text) }

// Annotation and label the Job controller puts on an Indexed Job's pods.
const (
	labelJobName         = batchv1.JobNameLabel                 // batch.kubernetes.io/job-name
	labelCompletionIndex = batchv1.JobCompletionIndexAnnotation // batch.kubernetes.io/job-completion-index
)

// podRank is a pod's Falcon rank: its completion index (annotation, else
// label, both set by the Job controller) plus its slice's first rank
// (render.PodRank), else the <index> of the pod name <job>-<index>-<suffix>.
// -1 if none says.
func podRank(p *corev1.Pod, job string) int {
	if n := render.PodRank(p); n >= 0 {
		return n
	}
	return nameRank(p.Name, job)
}

// nameRank parses the rank out of <job>-<index>-<suffix> (a pod of an
// Indexed Job) or <job>-<index> (its hostname, which names its bucket
// object). -1 if name is neither.
func nameRank(name, job string) int {
	rest, ok := strings.CutPrefix(name, job+"-")
	if !ok {
		return -1
	}
	idx, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 || strconv.Itoa(n) != idx {
		return -1
	}
	return n
}

// splitStamp splits a kubelet log line ("<RFC 3339 nano time> <text>") into
// its time and text. A line without a valid time gives the zero time and the
// whole line.
func splitStamp(line []byte) (time.Time, []byte) {
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		i = len(line)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(line[:i]))
	if err != nil {
		return time.Time{}, line
	}
	if i == len(line) {
		return ts, nil
	}
	return ts, line[i+1:]
}

// trimEOL removes one trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// ring keeps the last n lines added.
type ring struct {
	buf  []Line
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]Line, n)} }

func (r *ring) add(l Line) {
	r.buf[r.next] = l
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// lines returns the kept lines, oldest first.
func (r *ring) lines() []Line {
	if !r.full {
		return slices.Clone(r.buf[:r.next])
	}
	return append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
}
