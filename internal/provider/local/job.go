package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// job is one job as this executor knows it. It enters Executor.jobs before
// it is loaded from disk or started, and ready is closed when that is done:
// exactly one caller initialises a job while every other caller for the same
// ID waits. That is what makes concurrent Starts start one set of processes.
type job struct {
	id    string
	ready chan struct{}
	// Written before ready is closed, read-only after.
	present bool  // false: there is no such job; the entry was removed
	err     error // initialisation failed; the entry was removed

	mu        sync.Mutex
	ranks     []*rank
	stopping  string // the end recorded for ranks that end from now on; "" while nobody stops the job
	recovered bool   // Recover-style lost markers were written when the job was loaded
}

// rank is one process group: a pod on a real cluster.
type rank struct {
	index int
	pod   string
	cmd   *exec.Cmd // nil unless this executor started it
	pid   int       // leader pid = process group ID
	done  chan struct{}
	exit  *exitRecord // guarded by job.mu; set once, immutable after

	sigMu sync.Mutex
	// exiting is set by the reaper once the leader has exited; from then on
	// only the reaper may signal the group, because only it knows when the
	// leader is reaped and the group ID may be recycled.
	exiting bool
}

func (j *job) views() []rankView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := make([]rankView, len(j.ranks))
	for i, r := range j.ranks {
		v[i] = rankView{rank: r.index, pod: r.pod, exit: r.exit}
	}
	return v
}

func (j *job) wasRecovered() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.recovered
}

// acquire returns the job, loading it from disk on first use. With spec set
// it starts the job if it exists nowhere. A nil job and nil error mean no
// such job.
func (e *Executor) acquire(ctx context.Context, id string, spec *Spec) (*job, error) {
	for {
		e.mu.Lock()
		j, ok := e.jobs[id]
		if !ok {
			if spec != nil && e.closed {
				e.mu.Unlock()
				return nil, ErrClosed
			}
			j = &job{id: id, ready: make(chan struct{})}
			e.jobs[id] = j
			e.mu.Unlock()
			err := e.initJob(ctx, j, spec)
			if !j.present {
				return nil, err
			}
			return j, err
		}
		e.mu.Unlock()
		select {
		case <-j.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if j.present {
			return j, nil
		}
		if j.err == nil && spec == nil {
			return nil, nil
		}
		// The entry is gone: its initialiser failed, or found nothing where
		// we have something to start. Try again as the initialiser.
	}
}

func (e *Executor) initJob(ctx context.Context, j *job, spec *Spec) (err error) {
	defer close(j.ready)
	j.present, err = e.load(ctx, j)
	if err == nil && !j.present && spec != nil {
		j.present, err = e.start(j, *spec)
	}
	if !j.present {
		j.err = err
		e.mu.Lock()
		if e.jobs[j.id] == j {
			delete(e.jobs, j.id)
		}
		e.mu.Unlock()
	}
	return err
}

// start creates the job's directories, records it, and starts its ranks.
// persisted reports whether the job now exists (job.json was written).
func (e *Executor) start(j *job, s Spec) (persisted bool, err error) {
	l := e.layout
	artifactDir := l.artifactDir(s.ExpID, s.ArtifactID)
	dirs := []string{l.logDir(s.JobID), artifactDir}
	for i := range s.Replica {
		dirs = append(dirs, l.rankDir(s.JobID, i))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return false, err
		}
	}
	// job.json before any process: a crash from here on leaves a job that
	// Recover will find, never a process nobody knows about.
	rec := jobRecord{JobID: s.JobID, ExpID: s.ExpID, ArtifactID: s.ArtifactID, Role: s.Role, Replica: s.Replica, Created: e.clock.Now()}
	if err := writeJSONAtomic(l.jobFile(s.JobID), rec); err != nil {
		return false, err
	}

	env := e.jobEnv(s, artifactDir)
	j.mu.Lock()
	defer j.mu.Unlock()
	var started []*rank
	for i := range s.Replica {
		r := &rank{index: i, pod: podName(s.JobID, i), done: make(chan struct{})}
		j.ranks = append(j.ranks, r)
		if err != nil {
			e.recordLocked(j, r, exitRecord{End: endSibling, Detail: "not started: an earlier rank failed to start"})
			continue
		}
		rankEnv := slices.Concat(env, []string{envRank + "=" + strconv.Itoa(i)})
		if serr := e.startRank(j, r, s.Command, rankEnv); serr != nil {
			err = fmt.Errorf("start job %s: rank %d (pod %s): %w", s.JobID, i, r.pod, serr)
			e.recordLocked(j, r, exitRecord{End: endStartFailed, Detail: serr.Error()})
			continue
		}
		started = append(started, r)
	}
	if err != nil {
		j.stopping = endSibling
		if len(started) > 0 {
			e.spawn(func() { _ = e.terminate(context.Background(), started) })
		}
		return true, err
	}
	e.log.Info("started job", "job", s.JobID, "replica", s.Replica)
	return true, nil
}

func (e *Executor) startRank(j *job, r *rank, command string, env []string) error {
	// Every started process needs its reaper, so the reaper's slot is taken
	// before the process exists; Shutdown then cannot miss it.
	if !e.hold() {
		return ErrClosed
	}
	reaping := false
	defer func() {
		if !reaping {
			e.wg.Done()
		}
	}()
	logf, err := os.OpenFile(e.layout.logFile(j.id, r.pod), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = e.layout.rankDir(j.id, r.index)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.pid = cmd, cmd.Process.Pid
	// Nobody reaps the child before reap runs, so /proc/<pid> exists even
	// if it has already exited.
	info, err := readProc(r.pid)
	if err != nil {
		e.log.Warn("cannot read the start time of a rank; a restart will identify it by its environment only",
			"job", j.id, "pod", r.pod, "err", err)
	}
	pr := pidRecord{Pid: r.pid, StartTicks: info.start, BootID: e.boot, Started: e.clock.Now()}
	if err := writeJSONAtomic(e.layout.pidFile(j.id, r.index), pr); err != nil {
		// Keep it running: a restart still finds it by its environment.
		e.log.Error("cannot record a rank's pid", "job", j.id, "pod", r.pod, "err", err)
	}
	reaping = true
	go func() {
		defer e.wg.Done()
		e.reap(j, r)
	}()
	return nil
}

// reap waits for a rank's leader to exit and records how it ended. Its steps:
//  1. wait for the leader to exit, leaving it an unreaped zombie;
//  2. take over signalling the group from Kill (exiting);
//  3. SIGKILL what the leader left in its group, as a pod's processes die
//     with its main container, and wait until they are gone;
//  4. reap the leader (after which its group ID may be recycled);
//  5. write the exit marker and, if this is the job's first failure, stop
//     the other ranks: a slice with a dead rank is useless;
//  6. tell the controller.
func (e *Executor) reap(j *job, r *rank) {
	var werr error
	if err := waitExited(r.pid); err != nil {
		// Not expected. Without the pinned zombie the group cannot be
		// signalled safely after the leader exits, so stragglers are left
		// alone rather than risk signalling a recycled group.
		e.log.Error("waitid on a rank failed", "job", j.id, "pod", r.pod, "err", err)
		werr = r.cmd.Wait()
		r.sigMu.Lock()
		r.exiting = true
		r.sigMu.Unlock()
	} else {
		r.sigMu.Lock()
		r.exiting = true
		r.sigMu.Unlock()
		e.killStragglers(j.id, r.pid)
		werr = r.cmd.Wait()
	}

	x := exitRecord{End: endExited, Pid: r.pid}
	if ps := r.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			x.Signal = int(ws.Signal())
		} else {
			c := ps.ExitCode()
			x.Code = &c
		}
	} else {
		c := -1
		x.Code, x.Detail = &c, fmt.Sprintf("wait: %v", werr)
	}
	if e.abandoned.Load() {
		close(r.done)
		return
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopping != "" {
		x.End = j.stopping
	} else if x.rootCause() {
		j.stopping = endSibling
		var siblings []*rank
		for _, s := range j.ranks {
			if s != r && s.exit == nil {
				siblings = append(siblings, s)
			}
		}
		if len(siblings) > 0 {
			e.spawn(func() { _ = e.terminate(context.Background(), siblings) })
		}
	}
	e.log.Info("rank ended", "job", j.id, "pod", r.pod, "end", x.End, "exitCode", x.logCode())
	e.recordLocked(j, r, x)
}

// killStragglers kills and waits out every process left in the group of a
// leader that has exited but is not reaped yet (so pgid is still ours).
func (e *Executor) killStragglers(jobID string, pgid int) {
	deadline := time.Now().Add(killWait)
	for {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		procs, err := scanProcs()
		if err != nil || !slices.ContainsFunc(procs, func(p procInfo) bool { return p.pgrp == pgid && p.live() }) {
			return
		}
		if time.Now().After(deadline) {
			e.log.Error("processes survive SIGKILL", "job", jobID, "pgid", pgid)
			return
		}
		time.Sleep(pollInterval)
	}
}

// recordLocked writes r's exit marker, publishes it in memory and tells the
// controller. The caller holds j.mu.
func (e *Executor) recordLocked(j *job, r *rank, x exitRecord) {
	x.Time = e.clock.Now()
	if err := writeJSONAtomic(e.layout.exitFile(j.id, r.index), x); err != nil {
		// Memory still has it; after a restart the rank will look lost.
		e.log.Error("cannot record how a rank ended", "job", j.id, "pod", r.pod, "err", err)
	}
	r.exit = &x
	close(r.done)
	e.notify(j.id)
}

// signal sends sig to the rank's process group unless its leader has
// exited, in which case the reaper is already killing the group.
func (r *rank) signal(sig syscall.Signal) {
	r.sigMu.Lock()
	defer r.sigMu.Unlock()
	if r.cmd != nil && !r.exiting {
		_ = syscall.Kill(-r.pid, sig)
	}
}

// stop terminates the job's running ranks, recording end for them.
func (e *Executor) stop(ctx context.Context, j *job, end string) error {
	j.mu.Lock()
	var running []*rank
	for _, r := range j.ranks {
		if r.exit == nil {
			running = append(running, r)
		}
	}
	if len(running) > 0 && j.stopping == "" {
		j.stopping = end
	}
	j.mu.Unlock()
	if len(running) == 0 {
		return nil
	}
	return e.terminate(ctx, running)
}

// terminate sends SIGTERM, waits the grace period, sends SIGKILL, and
// returns when every rank has been reaped and recorded (or ctx ends).
func (e *Executor) terminate(ctx context.Context, ranks []*rank) error {
	for _, r := range ranks {
		r.signal(syscall.SIGTERM)
	}
	if done, err := waitDone(ctx, ranks, e.clock.After(e.killGrace)); done || err != nil {
		return err
	}
	for _, r := range ranks {
		r.signal(syscall.SIGKILL)
	}
	_, err := waitDone(ctx, ranks, nil)
	return err
}

// waitDone waits until every rank is recorded (true), timeout fires (false),
// or ctx ends. A nil timeout never fires.
func waitDone(ctx context.Context, ranks []*rank, timeout <-chan time.Time) (bool, error) {
	for _, r := range ranks {
		select {
		case <-r.done:
		case <-timeout:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return true, nil
}

// load reads the job from disk. A rank without a valid exit marker was left
// running by an earlier Falcon process: its processes are killed and it is
// recorded as lost. present is false if the job is not on disk.
func (e *Executor) load(ctx context.Context, j *job) (present bool, err error) {
	var rec jobRecord
	if err := readJSON(e.layout.jobFile(j.id), &rec); err != nil {
		if notExist(err) {
			return false, nil
		}
		return false, err
	}
	if rec.Replica < 1 {
		return false, fmt.Errorf("%s: replica %d", e.layout.jobFile(j.id), rec.Replica)
	}
	var lost []lostRank
	ranks := make([]*rank, rec.Replica)
	for i := range ranks {
		r := &rank{index: i, pod: podName(j.id, i), done: make(chan struct{})}
		ranks[i] = r
		var x exitRecord
		err := readJSON(e.layout.exitFile(j.id, i), &x)
		if err == nil {
			r.exit = &x
			close(r.done)
			continue
		}
		if !notExist(err) {
			// Possibly written by the task itself (it shares the directory);
			// its processes may still run, so treat it like a missing one.
			e.log.Warn("unreadable exit marker; treating the rank as lost", "job", j.id, "rank", i, "err", err)
		}
		l := lostRank{rank: r}
		var p pidRecord
		if err := readJSON(e.layout.pidFile(j.id, i), &p); err == nil {
			l.pid = &p
		}
		lost = append(lost, l)
	}
	if len(lost) > 0 {
		if err := e.killOrphans(ctx, j.id, lost); err != nil {
			return false, err
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, l := range lost {
			x := exitRecord{End: endLost}
			if l.pid != nil {
				x.Pid = l.pid.Pid
			}
			if err := os.MkdirAll(e.layout.rankDir(j.id, l.rank.index), 0o755); err != nil {
				return false, err
			}
			e.recordLocked(j, l.rank, x)
		}
		j.recovered = true
		e.log.Warn("job was running when falcon stopped; recorded as lost", "job", j.id, "ranks", len(lost))
	}
	j.ranks = ranks
	return true, nil
}

type lostRank struct {
	rank *rank
	pid  *pidRecord // nil if the rank never recorded one
}

// killOrphans kills the process groups of lost ranks that still exist,
// SIGTERM first and SIGKILL after the grace period. See Recover for how a
// group is recognised as ours.
func (e *Executor) killOrphans(ctx context.Context, jobID string, lost []lostRank) error {
	procs, err := scanProcs()
	if err != nil {
		return err
	}
	jobVar := envJobID + "=" + jobID
	candidates := map[int]uint64{} // pgid -> leader start ticks, 0 if unknown
	lostRanks := map[string]bool{}
	for _, l := range lost {
		lostRanks[envRank+"="+strconv.Itoa(l.rank.index)] = true
		if p := l.pid; p != nil && p.Pid > 0 && p.BootID == e.boot {
			candidates[p.Pid] = p.StartTicks
		}
	}
	for _, p := range procs {
		if _, ok := candidates[p.pgrp]; ok || !p.live() || !environHas(p.pid, jobVar) {
			continue
		}
		for v := range lostRanks {
			if environHas(p.pid, v) {
				candidates[p.pgrp] = 0
				break
			}
		}
	}
	if len(candidates) == 0 {
		return nil
	}

	// ours lists the candidate groups that still have a live member and are
	// still recognisably this job's, from a fresh look at /proc.
	ours := func() []int {
		procs, err := scanProcs()
		if err != nil {
			return nil
		}
		var pgids []int
		for pgid, start := range candidates {
			if groupIsJobs(procs, pgid, start, jobVar) {
				pgids = append(pgids, pgid)
			}
		}
		return pgids
	}
	signal := func(pgids []int, sig syscall.Signal) {
		for _, pgid := range pgids {
			_ = syscall.Kill(-pgid, sig)
		}
	}
	pgids := ours()
	if len(pgids) == 0 {
		return nil
	}
	e.log.Warn("killing processes left by an earlier falcon", "job", jobID, "pgids", pgids)
	signal(pgids, syscall.SIGTERM)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	grace := e.clock.After(e.killGrace)
	var killDeadline <-chan time.Time // armed once SIGKILL is sent
	for len(pgids) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-grace:
			grace = nil
			signal(ours(), syscall.SIGKILL)
			killDeadline = time.After(killWait)
		case <-killDeadline:
			return fmt.Errorf("processes of job %s survive SIGKILL: process groups %v", jobID, pgids)
		case <-tick.C:
		}
		pgids = ours()
	}
	return nil
}

// groupIsJobs reports whether process group pgid has a live member and
// belongs to the job. If its leader lives, the leader's start time decides
// (a different start time means the pid was recycled). Otherwise a member
// must carry the job's environment: a group whose leader is gone keeps its
// ID pinned only as long as it has members, so a recycled ID would have a
// new leader, whose environment would not be ours.
func groupIsJobs(procs []procInfo, pgid int, start uint64, jobVar string) bool {
	var members []procInfo
	for _, p := range procs {
		if p.pgrp == pgid && p.live() {
			members = append(members, p)
		}
	}
	for _, m := range members {
		if m.pid == pgid && start != 0 {
			return m.start == start
		}
	}
	return slices.ContainsFunc(members, func(m procInfo) bool { return environHas(m.pid, jobVar) })
}
