package apiserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/logtime"
	"github.com/falconhq/falcon/internal/podlogs"
	"github.com/falconhq/falcon/internal/store"
)

// GetExpLogs streams the logs of an experiment's pods from where they are:
// falcon dev's files (<logDir>/<job_id>/<pod>.log), the pod log API of a
// Kubernetes or GKE cluster while the pods exist, or the log objects they
// left in the cluster's bucket. Lines are never truncated: a line of any
// length is sent whole (a 64 KiB cut-off is a classic way to lose results).
// With follow, it keeps sending new lines until the experiment ends and
// every log is drained, or the client goes away; each line from a cluster
// carries a resume token that continues after it.
func (s *Server) GetExpLogs(req *falconv1.GetExpLogsRequest, stream falconv1.ExperimentService_GetExpLogsServer) (err error) {
	ctx := stream.Context()
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return err
	}
	if req.GetTail() < 0 {
		return errdefs.Invalid("tail", "must be 0 (all lines) or positive, got %d", req.GetTail())
	}
	if _, err := s.store.GetExp(ctx, req.GetId()); err != nil {
		return err
	}
	jobs, err := s.allJobs(ctx, store.JobFilter{ExpID: req.GetId()})
	if err != nil {
		return err
	}
	if jobs, err = jobsOfRole(req.GetId(), req.GetRole(), jobs); err != nil {
		return err
	}
	if req.Rank != nil {
		r := req.GetRank()
		ok := false
		for _, j := range jobs {
			ok = ok || (r >= 0 && r < j.TaskSpec.Ranks())
		}
		if !ok {
			have := make([]string, len(jobs))
			for i, j := range jobs {
				have[i] = fmt.Sprintf("%s has ranks 0 to %d", j.Role, j.TaskSpec.Ranks()-1)
				if j.TaskSpec.Ranks() == 1 {
					have[i] = j.Role + " has rank 0 only"
				}
			}
			slices.Sort(have)
			return errdefs.Invalid("rank", "no selected role has rank %d (%s)", r, strings.Join(have, "; "))
		}
	}

	var grep *regexp.Regexp
	if g := req.GetGrep(); g != "" {
		if grep, err = regexp.Compile(g); err != nil {
			return errdefs.Invalid("grep", "%q is not an RE2 expression: %v", g, err)
		}
	}
	b := &lineBatcher{send: stream.Send}
	defer func() {
		if ferr := b.flush(); err == nil {
			err = ferr
		}
	}()
	if req.GetFollow() {
		// Lines that trickle in while following reach the client within
		// a tick; a burst goes out in full batches.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(logFlushEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					_ = b.flush()
				}
			}
		}()
	}
	local, remote, err := s.splitByBackend(ctx, jobs)
	if err != nil {
		return err
	}
	resume, err := parseResume(req.GetResume())
	if err != nil {
		return err
	}
	// Every job has its cursor before any reader starts: readers then only
	// move positions inside them, under the batcher's lock, while the
	// map of jobs is only read.
	for _, j := range jobs {
		if resume[j.ID] == nil {
			resume[j.ID] = podlogs.Cursor{}
		}
	}
	// The cursor moves with every line but is encoded once per batch, on
	// its last line: that is the line a client has printed last when a
	// stream breaks (a batch arrives whole or not at all), and a token per
	// line cost a JSON encoding of every pod's position per line.
	b.setSeal(func(last *falconv1.LogLine) { last.Resume = resume.token() })
	if len(remote) == 0 {
		return s.localLogs(ctx, req, local, grep, b, resume)
	}
	if len(local) == 0 {
		return s.clusterLogs(ctx, req, remote, b, resume)
	}
	errc := make(chan error, 2)
	go func() { errc <- s.localLogs(ctx, req, local, grep, b, resume) }()
	go func() { errc <- s.clusterLogs(ctx, req, remote, b, resume) }()
	return errors.Join(<-errc, <-errc)
}

// jobsOfRole keeps the job of role ("" keeps all), or says which roles the
// experiment has.
func jobsOfRole(expID, role string, jobs []*store.Job) ([]*store.Job, error) {
	if role == "" {
		return jobs, nil
	}
	var roles []string
	for _, j := range jobs {
		if j.Role == role {
			return []*store.Job{j}, nil
		}
		roles = append(roles, j.Role)
	}
	return nil, errdefs.Invalid("role", "experiment %s has no role %q; roles: %s", expID, role, strings.Join(roles, ", "))
}

// A log batch is sent when it holds logBatchLines lines or logBatchBytes
// bytes, when a source has nothing more for now, and while following at
// least every logFlushEvery.
const (
	logBatchLines = 1024
	logBatchBytes = 256 << 10
	logFlushEvery = 100 * time.Millisecond
)

// lineBatcher gathers lines into LogLines messages: one gRPC message (and
// one gateway chunk) per line cost more than the line itself.
type lineBatcher struct {
	mu      sync.Mutex
	send    func(*falconv1.LogLines) error
	pending []*falconv1.LogLine
	bytes   int
	err     error
	seal    func(last *falconv1.LogLine)
}

func (b *lineBatcher) add(l *falconv1.LogLine) error {
	return b.addFunc(func() *falconv1.LogLine { return l })
}

// addFunc adds the line build returns; build runs under the batcher's lock,
// so state it moves (a resume cursor) is in step with what seal reads.
func (b *lineBatcher) addFunc(build func() *falconv1.LogLine) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	l := build()
	b.pending = append(b.pending, l)
	b.bytes += len(l.GetLine()) + 64
	if len(b.pending) >= logBatchLines || b.bytes >= logBatchBytes {
		return b.flushLocked()
	}
	return nil
}

// setSeal sets what finishes a batch before it is sent, on its last line.
func (b *lineBatcher) setSeal(seal func(last *falconv1.LogLine)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seal = seal
}

func (b *lineBatcher) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *lineBatcher) flushLocked() error {
	if b.err != nil || len(b.pending) == 0 {
		return b.err
	}
	if b.seal != nil {
		b.seal(b.pending[len(b.pending)-1])
	}
	b.err = b.send(&falconv1.LogLines{Lines: b.pending})
	b.pending, b.bytes = nil, 0
	return b.err
}

// splitByBackend parts jobs whose logs falcon dev writes to its log dir
// (the local backend, and jobs not placed yet, whose files appear once
// they are) from jobs on Kubernetes and GKE clusters.
func (s *Server) splitByBackend(ctx context.Context, jobs []*store.Job) (local, remote []*store.Job, err error) {
	backends := map[string]string{}
	for _, j := range jobs {
		if j.ClusterName == "" {
			local = append(local, j)
			continue
		}
		b, ok := backends[j.ClusterName]
		if !ok {
			c, err := s.store.GetCluster(ctx, j.ClusterName)
			switch {
			case errors.Is(err, errdefs.ErrNotFound):
				b = "local" // deleted since: only files can be left
			case err != nil:
				return nil, nil, err
			default:
				b = c.Backend
			}
			backends[j.ClusterName] = b
		}
		if b == "local" {
			local = append(local, j)
		} else {
			remote = append(remote, j)
		}
	}
	return local, remote, nil
}

// localLogs streams the files falcon dev writes, <logDir>/<job_id>/<pod>.log.
// A pod's position in resume is the byte offset after the last line sent:
// a resumed read starts there, so lines are neither lost nor repeated
// across a broken stream or a restart of the server (the files outlive it).
func (s *Server) localLogs(ctx context.Context, req *falconv1.GetExpLogsRequest, jobs []*store.Job, grep *regexp.Regexp, b *lineBatcher, resume logCursor) error {
	readers := map[string]*podReader{}
	defer func() {
		for _, pr := range readers {
			pr.close()
		}
	}()
	// A line's time is when the file was first seen holding all of it
	// (package logtime); a line of a log written without an index has
	// none, and --since lets it through.
	since := optTime(req.GetSince())
	// scan opens any pod files that appeared and sends what is new in each.
	scan := func(first bool) error {
		for _, j := range jobs {
			for _, pod := range s.pods(j.ID) {
				rank := podRank(j.ID, pod)
				if req.Rank != nil && rank != req.GetRank() {
					continue
				}
				key := j.ID + "/" + pod
				pr, ok := readers[key]
				if !ok {
					path := filepath.Join(s.logDir, j.ID, pod+".log")
					f, err := os.Open(path)
					if err != nil {
						continue
					}
					times, err := logtime.Open(path)
					if err != nil {
						f.Close()
						return err
					}
					pr = &podReader{f: f, r: bufio.NewReader(f), times: times}
					readers[key] = pr
					pos, resumed := s.logPosition(b, resume, j.ID, pod)
					switch {
					case resumed:
						if err := pr.seek(pos); err != nil {
							return err
						}
					case first && req.GetTail() > 0:
						if err := pr.skipToTail(int(req.GetTail())); err != nil {
							return err
						}
					}
					// The pod's start counts as read: a resume after lines
					// of other pods must not print what --tail skipped here.
					s.setLogPosition(b, resume, j.ID, pod, pr.offset)
				}
				for {
					line, ok := pr.next(req.GetFollow())
					if !ok {
						break
					}
					if grep != nil && !grep.MatchString(strings.TrimSuffix(line, "\n")) {
						continue
					}
					at, dated := pr.times.At(pr.offset)
					if !dated && pr.times.Indexed() {
						// Read before its supervisor noted it: written
						// just now, which is what the note would say.
						at, dated = time.Now(), true
					}
					if dated && since != nil && at.Before(*since) {
						continue
					}
					// A protobuf string must be valid UTF-8: a log
					// with binary output would otherwise end the stream.
					out := &falconv1.LogLine{JobId: j.ID, Role: j.Role, Rank: rank, Pod: pod, Line: strings.ToValidUTF8(line, "\uFFFD")}
					if dated {
						out.Time = timestamppb.New(at)
					}
					next := pr.offset
					if err := b.addFunc(func() *falconv1.LogLine {
						resume[j.ID][pod] = podlogs.Position{Offset: next}
						return out
					}); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := scan(true); err != nil {
		return err
	}
	if !req.GetFollow() {
		return nil
	}
	for {
		exp, err := s.store.GetExp(ctx, req.GetId())
		if err != nil {
			return err
		}
		done := lifecycle.ExperimentMachine.IsTerminal(exp.Status)
		if err := scan(false); err != nil {
			return err
		}
		if done {
			// Drain partial last lines of finished processes.
			for _, pr := range readers {
				pr.flush = true
			}
			return scan(false)
		}
		select {
		case <-ctx.Done():
			// Not a clean end: the experiment still runs. If the client
			// left, nobody reads this; if the server is stopping, the
			// client learns to resume rather than take the close for the
			// end of the logs.
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(s.logPoll):
		}
	}
}

// pods lists the pod names that have a log file for a job, in rank order.
func (s *Server) pods(jobID string) []string {
	entries, err := os.ReadDir(filepath.Join(s.logDir, jobID))
	if err != nil {
		return nil
	}
	var pods []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".log"); ok && !e.IsDir() {
			pods = append(pods, name)
		}
	}
	sort.Slice(pods, func(a, b int) bool { return podRank(jobID, pods[a]) < podRank(jobID, pods[b]) })
	return pods
}

// podRank reads the rank from a pod name <job_id>-<rank>; -1 if it has none.
func podRank(jobID, pod string) int32 {
	n, err := strconv.Atoi(strings.TrimPrefix(pod, jobID+"-"))
	if err != nil {
		return -1
	}
	return int32(n)
}

type podReader struct {
	f       *os.File
	r       *bufio.Reader
	times   *logtime.Reader // when the log reached each offset
	partial []byte
	flush   bool // the writer is gone: a trailing line without newline is complete
	// offset is where the line after the last one returned starts.
	offset int64
}

// next returns the next complete line. While following, a line still being
// written (no newline yet) is kept until it is complete.
func (p *podReader) next(follow bool) (string, bool) {
	b, err := p.r.ReadBytes('\n')
	p.partial = append(p.partial, b...)
	if err == nil {
		line := strings.TrimSuffix(string(p.partial), "\n")
		p.offset += int64(len(p.partial))
		p.partial = p.partial[:0]
		return line, true
	}
	if (!follow || p.flush) && len(p.partial) > 0 {
		line := string(p.partial)
		p.offset += int64(len(p.partial))
		p.partial = p.partial[:0]
		return line, true
	}
	return "", false
}

// skipToTail positions the reader so that only the last n lines remain.
func (p *podReader) skipToTail(n int) error {
	st, err := p.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	newlines := 0
	pos := size
	// A trailing newline ends the last line rather than starting a new one.
	if size > 0 {
		one := make([]byte, 1)
		if _, err := p.f.ReadAt(one, size-1); err == nil && one[0] == '\n' {
			newlines = -1
		}
	}
	for pos > 0 {
		step := int64(chunk)
		if pos < step {
			step = pos
		}
		pos -= step
		if _, err := p.f.ReadAt(buf[:step], pos); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for i := step - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				newlines++
				if newlines == n {
					return p.seek(pos + i + 1)
				}
			}
		}
	}
	return p.seek(0)
}

func (p *podReader) seek(off int64) error {
	if _, err := p.f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("seek log: %w", err)
	}
	p.r.Reset(p.f)
	p.offset = off
	return nil
}

// logPosition is where a resumed read of a local pod's log starts, read
// under the batcher's lock, which guards the cursor.
func (s *Server) logPosition(b *lineBatcher, resume logCursor, jobID, pod string) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pos, ok := resume[jobID][pod]
	return pos.Offset, ok
}

func (s *Server) setLogPosition(b *lineBatcher, resume logCursor, jobID, pod string, off int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	resume[jobID][pod] = podlogs.Position{Offset: off}
}

func (p *podReader) close() { _ = p.f.Close(); _ = p.times.Close() }

// optTime is an optional request time as Go's: nil when it was not set.
func optTime(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime()
	return &t
}
