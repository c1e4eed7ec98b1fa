package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/falconhq/falcon/internal/logtime"
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
	stopping  string // the end Falcon is stopping the job with (its stop file); "" while nobody stops it
	recovered bool   // ranks that ended unrecorded were found when the job was loaded
}

// rank is one rank's supervisor, and through it the rank's process group:
// a pod on a real cluster.
type rank struct {
	index int
	pod   string
	pid   int // the supervisor's pid, as in the pid file; 0 if unknown

	// How to reach the supervisor; nil if it never ran under this executor.
	// A child is signalled through os.Process (pinned until reaped); an
	// adopted one through a pidfd, which is also how its exit is seen.
	sig    func(syscall.Signal) error
	pfd    *pidfd        // adopted only
	exited chan struct{} // child only: closed once it has been reaped
	status string        // child only: how it ended ("was killed by signal 9"); set before exited closes

	done chan struct{}
	exit *exitRecord // guarded by job.mu; set once, immutable after
}

func (r *rank) signal(sig syscall.Signal) {
	if r.sig != nil {
		_ = r.sig(sig) // it may have ended already: then there is nothing to stop
	}
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
		rankEnv := slices.Concat(env, s.rankEnv(i))
		if serr := e.startRank(j, r, s.Command, rankEnv); serr != nil {
			err = fmt.Errorf("start job %s: rank %d (pod %s): %w", s.JobID, i, r.pod, serr)
			e.recordLocked(j, r, exitRecord{End: endStartFailed, Detail: serr.Error()})
			continue
		}
		started = append(started, r)
	}
	if err != nil {
		if ierr := e.intendLocked(j, endSibling); ierr != nil {
			e.log.Error("cannot record why a job is stopped", "job", s.JobID, "err", ierr)
		}
		if len(started) > 0 {
			e.spawn(func() { _ = e.terminate(context.Background(), started) })
		}
		return true, err
	}
	e.log.Info("started job", "job", s.JobID, "replica", s.Replica)
	return true, nil
}

// startRank starts the rank's supervisor (see supervise), records its pid,
// and watches it.
func (e *Executor) startRank(j *job, r *rank, command string, env []string) error {
	// Every started supervisor needs its watcher, so the watcher's slot is
	// taken before the process exists; Shutdown then cannot miss it.
	if !e.hold() {
		return ErrClosed
	}
	watching := false
	defer func() {
		if !watching {
			e.wg.Done()
		}
	}()
	// When the log grew, for exp logs --timestamps and --since: the
	// command writes its log itself and stamps nothing (package logtime).
	times, err := os.OpenFile(e.layout.logFile(j.id, r.pod)+logtime.Suffix, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer times.Close() // first: a reader that finds the log finds its index
	logf, err := os.OpenFile(e.layout.logFile(j.id, r.pod), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the supervisor has its own descriptor, and hands it to the command
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	cmd := &exec.Cmd{
		Path: supervisorExe,
		Args: supervisorArgs(e.layout.exitFile(j.id, r.index), e.layout.stopFile(j.id), command),
		Dir:  e.layout.rankDir(j.id, r.index),
		// Last, so that a task's env var of the same name cannot unset it.
		Env:    append(slices.Clip(env), supervisorEnv+"=1"),
		Stdout: logf, Stderr: logf,
		ExtraFiles: []*os.File{readyW, times}, // readyFD, timesFD
		// A session of its own: a terminal's Ctrl-C or hangup meant for
		// `falcon dev` must not reach the ranks, which outlive it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	// Not counted in e.wg: it returns only when the supervisor ends, which
	// may be long after Shutdown. It only reaps; the watcher decides.
	go func() {
		err := cmd.Wait()
		r.status = describeWait(cmd.ProcessState, err)
		close(exited)
	}()
	// The supervisor starts the command only after it is ready, so one
	// that never gets there has run nothing and can simply be killed.
	_ = readyR.SetReadDeadline(time.Now().Add(killWait))
	if n, _ := readyR.Read(make([]byte, 1)); n != 1 {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("the rank's supervisor (%s) did not start: it %s", supervisorExe, r.status)
	}
	r.pid, r.exited = cmd.Process.Pid, exited
	r.sig = func(s syscall.Signal) error { return cmd.Process.Signal(s) }
	// Nobody reaps the child before its Wait, so /proc/<pid> exists even if
	// it has already exited.
	info, err := readProc(r.pid)
	if err != nil {
		e.log.Warn("cannot read the start time of a rank's supervisor; a restart will identify it by its environment",
			"job", j.id, "pod", r.pod, "err", err)
	}
	pr := pidRecord{Pid: r.pid, StartTicks: info.start, BootID: e.boot, Started: e.clock.Now()}
	if err := writeJSONAtomic(e.layout.pidFile(j.id, r.index), pr); err != nil {
		// Keep it running: a restart still finds it by its environment.
		e.log.Error("cannot record a rank's pid", "job", j.id, "pod", r.pod, "err", err)
	}
	watching = true
	go func() {
		defer e.wg.Done()
		e.watch(j, r)
	}()
	return nil
}

// describeWait says how a supervisor process ended, for the rare exit
// marker the executor has to write in its place.
func describeWait(ps *os.ProcessState, err error) string {
	if ps == nil {
		return fmt.Sprintf("could not be waited for (%v)", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with code %d", ps.ExitCode())
}

// watch waits for a rank's supervisor to end and settles the rank, unless
// the executor is shut down first: then the rank is left to the next
// executor, which adopts it.
func (e *Executor) watch(j *job, r *rank) {
	if r.pfd != nil {
		defer r.pfd.close() // signalling a closed pidfd fails harmlessly
		if err := r.pfd.wait(); err != nil {
			return // closed by Shutdown
		}
	} else {
		select {
		case <-r.exited:
		case <-e.detached:
			return
		}
	}
	select {
	case <-e.detached:
		return
	default:
	}
	e.settle(j, r)
}

// settle records how a rank whose supervisor has ended finished. Its steps:
//  1. read the exit marker the supervisor wrote before it exited;
//  2. if there is none (the supervisor was SIGKILLed, or could not write),
//     kill what the rank left running, since nothing can report on it any
//     more, and write a marker that says the exit status is unknown;
//  3. publish the end, and if it is the job's first failure stop the other
//     ranks: a slice with a dead rank is useless;
//  4. tell the controller.
func (e *Executor) settle(j *job, r *rank) {
	x, err := e.readExit(j.id, r.index)
	if err != nil {
		detail := ""
		if r.status != "" {
			detail = "its supervisor " + r.status
		}
		x = exitRecord{End: endUnrecorded, Pid: r.pid, Detail: e.reapOrphans(j.id, []int{r.index}, detail)}
		j.mu.Lock()
		if j.stopping != "" {
			x.End = j.stopping // Falcon was stopping it: that is why it ended
		}
		j.mu.Unlock()
		x = e.writeFallbackExit(j.id, r.index, x)
	}
	e.finish(j, r, x)
}

// readExit reads a rank's exit marker. An unreadable one (the task shares
// the directory and may have written it) counts as missing.
func (e *Executor) readExit(jobID string, rank int) (exitRecord, error) {
	var x exitRecord
	err := readJSON(e.layout.exitFile(jobID, rank), &x)
	if err != nil && !notExist(err) {
		e.log.Warn("unreadable exit marker; treating it as missing", "job", jobID, "rank", rank, "err", err)
	}
	return x, err
}

// writeFallbackExit writes x as the rank's marker unless one appeared since
// it was found missing, which then wins; it returns the marker in force.
func (e *Executor) writeFallbackExit(jobID string, rank int, x exitRecord) exitRecord {
	x.Time = e.clock.Now()
	err := writeJSONNew(e.layout.exitFile(jobID, rank), x)
	if errors.Is(err, fs.ErrExist) {
		if got, rerr := e.readExit(jobID, rank); rerr == nil {
			return got
		}
	} else if err != nil {
		// Memory still has it; after a restart the rank is settled again.
		e.log.Error("cannot record how a rank ended", "job", jobID, "rank", rank, "err", err)
	}
	return x
}

// reapOrphans kills what is left of ranks whose supervisors are gone and
// returns detail, saying so if it found anything.
func (e *Executor) reapOrphans(jobID string, ranks []int, detail string) string {
	killed, err := e.killOrphans(context.Background(), jobID, ranks)
	if err != nil {
		e.log.Error("cannot stop processes a rank left behind", "job", jobID, "ranks", ranks, "err", err)
	}
	if !killed {
		return detail
	}
	if detail != "" {
		detail += "; "
	}
	return detail + "falcon stopped the processes it left behind"
}

// finish publishes how a rank ended (its marker is already on disk) and
// reacts to it: see settle.
func (e *Executor) finish(j *job, r *rank, x exitRecord) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r.exit != nil {
		return
	}
	if j.stopping == "" && x.rootCause() {
		e.stopSiblingsLocked(j, r)
	}
	e.log.Info("rank ended", "job", j.id, "pod", r.pod, "end", x.End, "exitCode", x.logCode())
	r.exit = &x
	close(r.done)
	e.notify(j.id)
}

// stopSiblingsLocked stops every running rank but failed, because failed
// failed the job. The caller holds j.mu.
func (e *Executor) stopSiblingsLocked(j *job, failed *rank) {
	var siblings []*rank
	for _, s := range j.ranks {
		if s != failed && s.exit == nil {
			siblings = append(siblings, s)
		}
	}
	if len(siblings) == 0 {
		return
	}
	// Stopped anyway if the stop file cannot be written: the job has
	// failed, and the siblings' markers are later than the failure, so the
	// failure stays the culprit.
	if err := e.intendLocked(j, endSibling); err != nil {
		e.log.Error("cannot record why a job is stopped", "job", j.id, "err", err)
	}
	e.spawn(func() { _ = e.terminate(context.Background(), siblings) })
}

// intendLocked records that Falcon stops the job with end, before any
// signal is sent, so every rank that ends from now on is recorded with it
// by its supervisor, even across a restart. The first intent wins. The
// caller holds j.mu.
func (e *Executor) intendLocked(j *job, end string) error {
	if j.stopping != "" {
		return nil
	}
	j.stopping = end
	return writeJSONAtomic(e.layout.stopFile(j.id), stopRecord{End: end, Time: e.clock.Now()})
}

// recordLocked writes a marker for a rank that has no supervisor to write
// one (it never started), publishes it and tells the controller. The caller
// holds j.mu.
func (e *Executor) recordLocked(j *job, r *rank, x exitRecord) {
	x.Time = e.clock.Now()
	if err := writeJSONAtomic(e.layout.exitFile(j.id, r.index), x); err != nil {
		e.log.Error("cannot record how a rank ended", "job", j.id, "pod", r.pod, "err", err)
	}
	r.exit = &x
	close(r.done)
	e.notify(j.id)
}

// stop terminates the job's running ranks, recording end for them. The
// intent is on disk before the first signal, or stop fails without one.
func (e *Executor) stop(ctx context.Context, j *job, end string) error {
	j.mu.Lock()
	var running []*rank
	for _, r := range j.ranks {
		if r.exit == nil {
			running = append(running, r)
		}
	}
	if len(running) > 0 {
		if err := e.intendLocked(j, end); err != nil {
			j.stopping = ""
			j.mu.Unlock()
			return fmt.Errorf("stop job %s: %w", j.id, err)
		}
	}
	j.mu.Unlock()
	if len(running) == 0 {
		return nil
	}
	return e.terminate(ctx, running)
}

// terminate asks the ranks' supervisors to SIGTERM their process groups,
// after the grace period to SIGKILL them, and returns when every rank has
// been recorded (or ctx ends, or the executor shuts down). A supervisor
// that does not answer within killWait is SIGKILLed itself; its watcher
// then kills what it left.
func (e *Executor) terminate(ctx context.Context, ranks []*rank) error {
	for _, r := range ranks {
		r.signal(syscall.SIGTERM)
	}
	if done, err := e.waitDone(ctx, ranks, e.clock.After(e.killGrace)); done || err != nil {
		return err
	}
	for _, r := range ranks {
		r.signal(sigKillGroup)
	}
	if done, err := e.waitDone(ctx, ranks, time.After(killWait)); done || err != nil {
		return err
	}
	e.log.Error("rank supervisors do not answer; killing them", "ranks", len(ranks))
	for _, r := range ranks {
		r.signal(syscall.SIGKILL)
	}
	_, err := e.waitDone(ctx, ranks, nil)
	return err
}

// waitDone waits until every rank is recorded (true), timeout fires (false),
// ctx ends, or the executor shuts down. A nil timeout never fires.
func (e *Executor) waitDone(ctx context.Context, ranks []*rank, timeout <-chan time.Time) (bool, error) {
	for _, r := range ranks {
		select {
		case <-r.done:
		case <-timeout:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-e.detached:
			return false, ErrClosed
		}
	}
	return true, nil
}

// load reads the job from disk, as an earlier executor (or this one, before
// a restart of the process) left it. Its steps:
//  1. read job.json and the stop file;
//  2. take each rank's exit marker as its end;
//  3. adopt each rank without one whose supervisor still runs: the pid
//     file's pid with the same start time and boot, or, if the pid file was
//     never written, a supervisor found by its environment;
//  4. for the rest, whose supervisors ended unrecorded while no executor
//     watched, kill what they left and write markers that say so;
//  5. go on stopping the job if it was being stopped, or if a rank failed
//     while no executor watched.
//
// present is false if the job is not on disk.
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
	if st, err := readStop(e.layout.stopFile(j.id)); err == nil {
		j.stopping = st.End
	} else if !notExist(err) {
		// Written atomically, so only someone else can have broken it. The
		// job is still known; ranks stopped from now on will say why.
		e.log.Warn("unreadable stop file; ignoring it", "job", j.id, "err", err)
	}
	ranks := make([]*rank, rec.Replica)
	var adopted, gone []*rank
	unsupervised := map[*rank]bool{}
	for i := range ranks {
		r := &rank{index: i, pod: podName(j.id, i), done: make(chan struct{})}
		ranks[i] = r
		if x, err := e.readExit(j.id, i); err == nil {
			r.exit = &x
			close(r.done)
			continue
		}
		switch e.adopt(j.id, r) {
		case rankAdopted:
			adopted = append(adopted, r)
			continue
		case rankUnsupervised:
			unsupervised[r] = true
		}
		// The supervisor may have written its marker and exited since.
		if x, err := e.readExit(j.id, i); err == nil {
			r.exit = &x
			close(r.done)
			continue
		}
		gone = append(gone, r)
	}
	if len(gone) > 0 {
		idx := make([]int, len(gone))
		for i, r := range gone {
			idx[i] = r.index
		}
		detail := e.reapOrphans(j.id, idx, "")
		for _, r := range gone {
			if err := os.MkdirAll(e.layout.rankDir(j.id, r.index), 0o755); err != nil {
				return false, err
			}
			x := exitRecord{End: endUnrecorded, Pid: r.pid, Unwatched: true, Detail: detail}
			if unsupervised[r] {
				// It was running: it ended because it was just killed.
				x.Unwatched = false
				x.Detail = "an older falcon started it without a supervisor, so its exit status cannot be known; falcon stopped it"
			}
			if j.stopping != "" {
				x.End = j.stopping
			}
			x = e.writeFallbackExit(j.id, r.index, x)
			r.exit = &x
			close(r.done)
		}
		j.recovered = true
		e.log.Warn("ranks had neither an exit marker nor a live supervisor; recorded as ended unrecorded", "job", j.id, "ranks", idx)
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	j.ranks = ranks
	for _, r := range adopted {
		if !e.hold() {
			r.pfd.close() // shutting down: leave the rank to the next executor
			continue
		}
		go func() {
			defer e.wg.Done()
			e.watch(j, r)
		}()
	}
	if len(adopted) > 0 {
		e.log.Info("adopted running ranks", "job", j.id, "ranks", len(adopted))
	}
	switch {
	case j.stopping != "":
		if len(adopted) > 0 {
			e.spawn(func() { _ = e.terminate(context.Background(), adopted) })
		}
	default:
		for _, r := range ranks {
			if r.exit != nil && r.exit.rootCause() {
				e.stopSiblingsLocked(j, r)
				break
			}
		}
	}
	return true, nil
}

// adoption is what adopt found of a rank without an exit marker.
type adoption int

const (
	rankGone         adoption = iota // no live supervisor: it ended, or never ran
	rankAdopted                      // its supervisor runs and r now watches it
	rankUnsupervised                 // its command runs without a supervisor (an older Falcon started it)
)

// adopt makes r watch the rank's supervisor if it still runs. A pid names
// the supervisor only with the recorded start time in the same boot, and
// only if it carries the rank's environment: a recycled pid is never
// adopted, and neither is the bare command an older Falcon started.
func (e *Executor) adopt(jobID string, r *rank) adoption {
	rankVars := []string{envJobID + "=" + jobID, envRank + "=" + strconv.Itoa(r.index)}
	supVars := append([]string{supervisorEnv + "=1"}, rankVars...)
	var p pidRecord
	err := readJSON(e.layout.pidFile(jobID, r.index), &p)
	switch {
	case err == nil:
		r.pid = p.Pid
		if p.BootID != e.boot || p.Pid <= 0 {
			return rankGone
		}
	case notExist(err):
		// Started, or about to be, by an executor that died before it
		// wrote the pid file.
		procs, serr := scanProcs()
		if serr != nil {
			return rankGone
		}
		i := slices.IndexFunc(procs, func(q procInfo) bool { return q.live() && q.sid == q.pid && environHas(q.pid, supVars...) })
		if i < 0 {
			return rankGone
		}
		p = pidRecord{Pid: procs[i].pid, StartTicks: procs[i].start, BootID: e.boot, Started: e.clock.Now()}
	default:
		e.log.Warn("unreadable pid file", "job", jobID, "rank", r.index, "err", err)
		return rankGone
	}
	pfd, err := openPidfd(p.Pid)
	if err != nil {
		return rankGone
	}
	// Checked after opening, so the pidfd is known to name this process.
	info, err := readProc(p.Pid)
	if err != nil || !info.live() || info.start != p.StartTicks {
		pfd.close()
		return rankGone
	}
	if !environHas(p.Pid, supVars...) {
		pfd.close()
		if environHas(p.Pid, rankVars...) {
			return rankUnsupervised
		}
		return rankGone
	}
	if notExist(readJSON(e.layout.pidFile(jobID, r.index), &pidRecord{})) {
		if err := writeJSONAtomic(e.layout.pidFile(jobID, r.index), p); err != nil {
			e.log.Error("cannot record a rank's pid", "job", jobID, "rank", r.index, "err", err)
		}
	}
	r.pid, r.pfd, r.sig = p.Pid, pfd, pfd.signal
	return rankAdopted
}

// killOrphans kills the process groups that ranks of the job left running
// without a supervisor (it was SIGKILLed, say), SIGTERM first and SIGKILL
// after the grace period, and reports whether there were any. Nothing can
// ever report how such processes end, and a job must not hold the machine
// after it is recorded as ended. A group is the job's if a live member
// carries FALCON_JOB_ID and the rank's FALCON_RANK; see groupIsJobs.
func (e *Executor) killOrphans(ctx context.Context, jobID string, ranks []int) (bool, error) {
	procs, err := scanProcs()
	if err != nil {
		return false, err
	}
	jobVar := envJobID + "=" + jobID
	candidates := map[int]bool{}
	for _, p := range procs {
		if candidates[p.pgrp] || !p.live() || !environHas(p.pid, jobVar) || environHas(p.pid, supervisorEnv+"=1") {
			continue
		}
		for _, i := range ranks {
			if environHas(p.pid, envRank+"="+strconv.Itoa(i)) {
				candidates[p.pgrp] = true
				break
			}
		}
	}
	if len(candidates) == 0 {
		return false, nil
	}

	// ours lists the candidate groups that still have a live member and are
	// still recognisably this job's, from a fresh look at /proc.
	ours := func() []int {
		procs, err := scanProcs()
		if err != nil {
			return nil
		}
		var pgids []int
		for pgid := range candidates {
			if groupIsJobs(procs, pgid, jobVar) {
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
		return false, nil
	}
	e.log.Warn("killing processes of ranks whose supervisors are gone", "job", jobID, "pgids", pgids)
	signal(pgids, syscall.SIGTERM)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	grace := e.clock.After(e.killGrace)
	var killDeadline <-chan time.Time // armed once SIGKILL is sent
	for len(pgids) > 0 {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-grace:
			grace = nil
			signal(ours(), syscall.SIGKILL)
			killDeadline = time.After(killWait)
		case <-killDeadline:
			return true, fmt.Errorf("processes of job %s survive SIGKILL: process groups %v", jobID, pgids)
		case <-tick.C:
		}
		pgids = ours()
	}
	return true, nil
}

// groupIsJobs reports whether process group pgid has a live member that
// carries the job's environment. A group whose leader is gone keeps its ID
// pinned only as long as it has members, so a recycled ID would have a new
// leader, whose environment would not be ours.
func groupIsJobs(procs []procInfo, pgid int, jobVar string) bool {
	return slices.ContainsFunc(procs, func(m procInfo) bool {
		return m.pgrp == pgid && m.live() && environHas(m.pid, jobVar)
	})
}
