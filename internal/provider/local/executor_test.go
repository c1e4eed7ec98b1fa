//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/validation"
)

// TestMain makes the test binary a child subreaper. The processes a job
// leaves behind (a command whose supervisor was killed, or its children) are
// then re-parented to us instead of to PID 1, which in a container may never
// reap them; reapOrphans can collect them, and a process group really
// disappears (kill(-pgid, 0) == ESRCH) once it is dead. The supervisors
// themselves are this binary too: see supervisor.go's init.
func TestMain(m *testing.M) {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", errno)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

const waitTimeout = 20 * time.Second // generous: the machine may be busy compiling

type harness struct {
	e     *Executor
	dir   string
	exits chan struct{} // one pending wake-up per OnExit, coalesced
}

func newHarness(t *testing.T, dir string, opts ...Option) *harness {
	t.Helper()
	h := &harness{dir: dir, exits: make(chan struct{}, 1)}
	wake := WithOnExit(func(string) {
		select {
		case h.exits <- struct{}{}:
		default:
		}
	})
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	e, err := New(dir, slices.Concat([]Option{wake, WithKillGrace(2 * time.Second), WithLogger(logger)}, opts)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.e = e
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		h.killAll(t, ctx)
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return h
}

// killAll kills every job in the data directory, since Shutdown leaves them
// running, unless the test has shut the executor down and left them to
// another.
func (h *harness) killAll(t *testing.T, ctx context.Context) {
	h.e.mu.Lock()
	closed := h.e.closed
	h.e.mu.Unlock()
	if closed {
		return
	}
	if _, err := h.e.Recover(ctx); err != nil {
		t.Errorf("Recover: %v", err)
	}
	h.e.mu.Lock()
	ids := slices.Collect(maps.Keys(h.e.jobs))
	h.e.mu.Unlock()
	for _, id := range ids {
		if err := h.e.Kill(ctx, id); err != nil {
			t.Errorf("Kill(%s): %v", id, err)
		}
	}
}

// waitPhase returns the job's status once it reaches phase, re-checking
// whenever a rank ends.
func (h *harness) waitPhase(t *testing.T, jobID string, phase Phase) Status {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		st, err := h.e.Status(context.Background(), jobID)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.Phase == phase {
			return st
		}
		select {
		case <-h.exits:
		case <-deadline:
			t.Fatalf("job %s: still %s (%s), want %s", jobID, st.Phase, st.Message, phase)
		}
	}
}

// waitEnded returns the job's status once none of its ranks runs.
func (h *harness) waitEnded(t *testing.T, jobID string) Status {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		st, err := h.e.Status(context.Background(), jobID)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if !slices.ContainsFunc(st.Pods, func(p PodStatus) bool { return p.Running }) {
			return st
		}
		select {
		case <-h.exits:
		case <-deadline:
			t.Fatalf("job %s: still running (%s)", jobID, st.Message)
		}
	}
}

func (h *harness) start(t *testing.T, s Spec) {
	t.Helper()
	if err := h.e.Start(context.Background(), s); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func (h *harness) pid(t *testing.T, jobID string, rank int) pidRecord {
	t.Helper()
	var p pidRecord
	if err := readJSON(layout{h.dir}.pidFile(jobID, rank), &p); err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	return p
}

func (h *harness) log(t *testing.T, jobID string, rank int) string {
	t.Helper()
	b, err := os.ReadFile(h.e.LogPath(jobID, podName(jobID, rank)))
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return string(b)
}

func newSpec(command string, replica int) Spec {
	return Spec{
		ExpID:      ids.New(ids.Experiment),
		JobID:      ids.New(ids.Job),
		ArtifactID: ids.New(ids.Artifact),
		Role:       "worker",
		Command:    command,
		Replica:    replica,
	}
}

// waitFor polls cond; only for what no notification exists for, such as a
// process writing to its log.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapOrphans reaps the dead processes of ranks re-parented to this
// process. Our own children belong to os/exec and are left alone: the
// supervisors (each leads its session) and the test's strangers (which are
// in our session).
func reapOrphans() {
	self, _ := readProc(os.Getpid())
	procs, _ := scanProcs()
	for _, p := range procs {
		if p.ppid == os.Getpid() && !p.live() && p.pid != p.sid && p.sid != self.sid {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

func groupGone(pgid int) bool {
	reapOrphans()
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// alive reports whether the process that had start time start still runs.
func alive(pid int, start uint64) bool {
	p, err := readProc(pid)
	return err == nil && p.start == start && p.live()
}

// jobLeaders lists the live supervisors carrying the job's identity: one per
// running rank.
func jobLeaders(jobID string) []int {
	procs, _ := scanProcs()
	var pids []int
	for _, p := range procs {
		if p.live() && p.pid == p.sid && environHas(p.pid, envJobID+"="+jobID, supervisorEnv+"=1") {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// childPids waits for a log holding n lines of pids and returns them.
func childPids(t *testing.T, h *harness, jobID string, n int) []int {
	t.Helper()
	waitFor(t, "children to be started", func() bool {
		return strings.Count(h.log(t, jobID, 0), "\n") >= n
	})
	var pids []int
	for f := range strings.FieldsSeq(h.log(t, jobID, 0)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("log line %q is not a pid", f)
		}
		pids = append(pids, pid)
	}
	return pids
}

func intp(i int) *int { return &i }

func TestStartRunsEveryRankWithItsEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHarness(t, dir, WithExtraEnv([]string{
		"PATH=" + os.Getenv("PATH"),
		"BASE_ONLY=from-base",
		"FALCON_JOB_ID=base-must-not-win",
	}))
	s := newSpec(`echo "rank=$FALCON_RANK"
echo "stderr of rank $FALCON_RANK" >&2
env | grep -E '^(FALCON_|CUSTOM_CONFIG_KEY=|ARTIFACT_LOCAL_DIR=|TASK_VAR=|BASE_ONLY=)' | sort
[ "$ARTIFACT_LOCAL_DIR" = "$FALCON_ARTIFACT_DIR" ] || exit 9
echo "written by rank $FALCON_RANK" > "$FALCON_ARTIFACT_DIR/rank-$FALCON_RANK.txt"
pwd`, 2)
	s.Config = `{"lr": 0.1, "name": "a b"}`
	s.Envs = map[string]string{"TASK_VAR": "task", "FALCON_RANK": "task-must-not-win"}

	h.start(t, s)
	got := h.waitPhase(t, s.JobID, PhaseSucceeded)

	want := Status{
		Phase:   PhaseSucceeded,
		Message: "2/2 processes exited with code 0",
		Pods: []PodStatus{
			{Name: s.JobID + "-0", Rank: 0, ExitCode: intp(0)},
			{Name: s.JobID + "-1", Rank: 1, ExitCode: intp(0)},
		},
	}
	if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	artDir := filepath.Join(dir, "experiments", s.ExpID, "artifacts", s.ArtifactID)
	for rank := range 2 {
		wantLog := strings.Join([]string{
			fmt.Sprintf("rank=%d", rank),
			fmt.Sprintf("stderr of rank %d", rank), // stderr shares the pod's log
			"ARTIFACT_LOCAL_DIR=" + artDir,
			"BASE_ONLY=from-base",
			"CUSTOM_CONFIG_KEY=" + s.Config,
			"FALCON_ARTIFACT_DIR=" + artDir,
			"FALCON_EXP_ID=" + s.ExpID,
			"FALCON_JOB_ID=" + s.JobID,
			fmt.Sprintf("FALCON_RANK=%d", rank),
			"FALCON_ROLE=worker",
			"FALCON_WORLD_SIZE=2",
			"TASK_VAR=task",
			filepath.Join(dir, "run", s.JobID, strconv.Itoa(rank)),
		}, "\n") + "\n"
		if diff := cmp.Diff(wantLog, h.log(t, s.JobID, rank)); diff != "" {
			t.Errorf("rank %d log (-want +got):\n%s", rank, diff)
		}
		b, err := os.ReadFile(filepath.Join(artDir, fmt.Sprintf("rank-%d.txt", rank)))
		if err != nil {
			t.Fatalf("artifact of rank %d: %v", rank, err)
		}
		if want := fmt.Sprintf("written by rank %d\n", rank); string(b) != want {
			t.Errorf("artifact of rank %d = %q, want %q", rank, b, want)
		}
	}
}

// A multi-slice job's ranks are its slices' hosts in order, each told its
// slice and how to find the others, as JAX multislice expects.
func TestStartGivesEverySliceItsMultisliceEnvironment(t *testing.T) {
	t.Parallel()
	h := newHarness(t, t.TempDir(), WithExtraEnv([]string{"PATH=" + os.Getenv("PATH")}))
	s := newSpec(`env | grep -E '^(FALCON_RANK|FALCON_WORLD_SIZE|MEGASCALE_)' | sort`, 6)
	s.Slices = 3
	h.start(t, s)
	h.waitPhase(t, s.JobID, PhaseSucceeded)
	for rank := range 6 {
		want := strings.Join([]string{
			fmt.Sprintf("FALCON_RANK=%d", rank),
			"FALCON_WORLD_SIZE=6",
			"MEGASCALE_COORDINATOR_ADDRESS=127.0.0.1:8081",
			"MEGASCALE_NUM_SLICES=3",
			"MEGASCALE_PORT=8081",
			fmt.Sprintf("MEGASCALE_SLICE_ID=%d", rank/2),
		}, "\n") + "\n"
		if diff := cmp.Diff(want, h.log(t, s.JobID, rank)); diff != "" {
			t.Errorf("rank %d environment (-want +got):\n%s", rank, diff)
		}
	}
	bad := newSpec("true", 5)
	bad.Slices = 2
	if err := h.e.Start(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "slices") {
		t.Errorf("5 ranks in 2 slices: %v; want an error naming slices", err)
	}
}

func TestStatusReportsHowARankEnded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		want    func(pod string) Status
	}{
		{
			name:    "exit code",
			command: "exit 3",
			want: func(pod string) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 3,
					Message: fmt.Sprintf("rank 0 (pod %s) exited with code 3", pod),
					Pods:    []PodStatus{{Name: pod, ExitCode: intp(3)}},
				}
			},
		},
		{
			name:    "signal",
			command: "kill -KILL $$",
			want: func(pod string) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 137,
					Message: fmt.Sprintf("rank 0 (pod %s) was killed by signal 9 (killed)", pod),
					Pods:    []PodStatus{{Name: pod, ExitCode: intp(137)}},
				}
			},
		},
		{
			name:    "success",
			command: "true",
			want: func(pod string) Status {
				return Status{
					Phase: PhaseSucceeded, Message: "1/1 processes exited with code 0",
					Pods: []PodStatus{{Name: pod, ExitCode: intp(0)}},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, t.TempDir())
			s := newSpec(tt.command, 1)
			h.start(t, s)
			want := tt.want(s.JobID + "-0")
			got := h.waitPhase(t, s.JobID, want.Phase)
			if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailingRankStopsItsSiblings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, t.TempDir())
	s := newSpec(`if [ "$FALCON_RANK" = 0 ]; then exit 1; fi; sleep 600 & wait`, 2)
	h.start(t, s)
	sibling := h.pid(t, s.JobID, 1)

	h.waitPhase(t, s.JobID, PhaseFailed)
	// The failure is reported at once; the sibling is stopped in the background.
	var got Status
	waitFor(t, "the sibling to be stopped", func() bool {
		got, _ = h.e.Status(context.Background(), s.JobID)
		return !got.Pods[1].Running
	})
	want := Status{
		Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 1,
		Message: fmt.Sprintf("rank 0 (pod %s-0) exited with code 1", s.JobID),
		Pods: []PodStatus{
			{Name: s.JobID + "-0", Rank: 0, ExitCode: intp(1)},
			{Name: s.JobID + "-1", Rank: 1, ExitCode: intp(128 + 15)},
		},
	}
	if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	if !groupGone(sibling.Pid) {
		t.Errorf("process group %d of the sibling still exists", sibling.Pid)
	}
}

func TestKillStopsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, t.TempDir())
	s := newSpec(`sleep 600 & echo $!; sleep 600 & echo $!; wait`, 1)
	h.start(t, s)
	leader := h.pid(t, s.JobID, 0)
	kids := childPids(t, h, s.JobID, 2)
	starts := make([]uint64, len(kids))
	for i, pid := range kids {
		p, err := readProc(pid)
		if err != nil {
			t.Fatalf("grandchild %d: %v", pid, err)
		}
		starts[i] = p.start
	}

	if err := h.e.Kill(context.Background(), s.JobID); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	// Kill has waited: nothing may be left, without polling.
	if !groupGone(leader.Pid) {
		t.Errorf("process group %d still exists after Kill", leader.Pid)
	}
	for i, pid := range kids {
		if alive(pid, starts[i]) {
			t.Errorf("grandchild %d still runs after Kill", pid)
		}
	}
	want := Status{
		Phase: PhaseFailed, Reason: ReasonKilled, ExitCode: 143, Message: "killed",
		Pods: []PodStatus{{Name: s.JobID + "-0", ExitCode: intp(143)}},
	}
	got, err := h.e.Status(context.Background(), s.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}

	// Idempotent, and a no-op for jobs nobody knows.
	for _, id := range []string{s.JobID, "job-unknown", "../escape"} {
		if err := h.e.Kill(context.Background(), id); err != nil {
			t.Errorf("Kill(%q) = %v, want nil", id, err)
		}
	}
	if again, _ := h.e.Status(context.Background(), s.JobID); !cmp.Equal(got, again) {
		t.Errorf("a second Kill changed the status to %+v", again)
	}
}

// fakeClock fires After channels only when the test advances it, and tells
// the test each time the executor starts waiting on one.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	afters chan time.Duration
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), afters: make(chan time.Duration, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	c.afters <- d
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.timers = slices.DeleteFunc(c.timers, func(t fakeTimer) bool {
		if t.at.After(c.now) {
			return false
		}
		t.ch <- c.now
		return true
	})
}

func TestKillEscalatesToSIGKILLAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	const grace = time.Minute
	h := newHarness(t, t.TempDir(), WithClock(clock), WithKillGrace(grace))
	// The shell and its child ignore SIGTERM; only SIGKILL ends them.
	s := newSpec(`trap '' TERM; sleep 600 & echo $!; wait`, 1)
	h.start(t, s)
	leader := h.pid(t, s.JobID, 0)
	kid := childPids(t, h, s.JobID, 1)[0]
	kidInfo, err := readProc(kid)
	if err != nil {
		t.Fatal(err)
	}

	killed := make(chan error, 1)
	go func() { killed <- h.e.Kill(context.Background(), s.JobID) }()
	select {
	case d := <-clock.afters: // SIGTERM has been sent; Kill waits out the grace period
		if d != grace {
			t.Fatalf("Kill waits %v, want the grace period %v", d, grace)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Kill never started its grace period")
	}
	select {
	case err := <-killed:
		t.Fatalf("Kill returned (%v) before the grace period ended", err)
	default:
	}
	if !alive(leader.Pid, leader.StartTicks) || !alive(kid, kidInfo.start) {
		t.Fatal("SIGTERM ended processes that ignore it; the test proves nothing")
	}

	clock.Advance(grace)
	select {
	case err := <-killed:
		if err != nil {
			t.Fatalf("Kill: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Kill did not return after the grace period")
	}
	if !groupGone(leader.Pid) || alive(kid, kidInfo.start) {
		t.Error("processes survive Kill")
	}
	got, _ := h.e.Status(context.Background(), s.JobID)
	if got.Phase != PhaseFailed || got.Reason != ReasonKilled || got.ExitCode != 137 {
		t.Errorf("Status = %+v, want Failed/Killed with exit code 137", got)
	}
}

func TestConcurrentStartsStartOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, t.TempDir())
	s := newSpec(`echo started; sleep 600`, 2)

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- h.e.Start(context.Background(), s) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	// Every Start has returned, so every process it made has been forked;
	// a leader's environment becomes readable only once its exec is done,
	// so give the scan a moment to see them all.
	want := []int{h.pid(t, s.JobID, 0).Pid, h.pid(t, s.JobID, 1).Pid}
	slices.Sort(want)
	var leaders []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		leaders = jobLeaders(s.JobID)
		slices.Sort(leaders)
		if len(leaders) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if diff := cmp.Diff(want, leaders); diff != "" {
		t.Errorf("process group leaders of the job (-pid files +running):\n%s", diff)
	}
	for rank := range 2 {
		waitFor(t, "the rank to log", func() bool { return h.log(t, s.JobID, rank) != "" })
		if got := h.log(t, s.JobID, rank); got != "started\n" {
			t.Errorf("rank %d log = %q, want one start", rank, got)
		}
	}
}

// mkfifo returns a new FIFO. A rank that reads it blocks until the test
// releases it, which is how a test decides when a rank ends, without sleeps.
func mkfifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// release lets the rank blocked reading the FIFO go on, once it reads it.
func release(t *testing.T, fifo string) {
	t.Helper()
	var f *os.File
	// Opening for writing without blocking fails (ENXIO) until a reader has
	// the FIFO open.
	waitFor(t, "a rank to read "+fifo, func() bool {
		var err error
		f, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil
	})
	defer f.Close()
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
}

// restart shuts down old, as a Falcon process would when it stops, and
// returns a new executor on the same data directory after Recover. As far as
// the data directory and the ranks can tell, Shutdown and a crash are the
// same: the old executor writes and signals nothing from then on.
func restart(t *testing.T, old *harness, wantRecovered []string, between func()) *harness {
	t.Helper()
	if err := old.e.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if between != nil {
		between()
	}
	h := newHarness(t, old.dir)
	got, err := h.e.Recover(context.Background())
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if diff := cmp.Diff(wantRecovered, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Recover (-want +got):\n%s", diff)
	}
	return h
}

func TestAdoptedRankReportsHowItEnded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  string // how the command ends once released
		// The executor died between starting the supervisor and writing its
		// pid file: the supervisor is found by its environment instead.
		dropPidFile bool
		want        func(pod string) Status
	}{
		{
			name: "exit code", end: "exit 3",
			want: func(pod string) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 3,
					Message: fmt.Sprintf("rank 0 (pod %s) exited with code 3", pod),
					Pods:    []PodStatus{{Name: pod, ExitCode: intp(3)}},
				}
			},
		},
		{
			name: "signal", end: "kill -KILL $$",
			want: func(pod string) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 137,
					Message: fmt.Sprintf("rank 0 (pod %s) was killed by signal 9 (killed)", pod),
					Pods:    []PodStatus{{Name: pod, ExitCode: intp(137)}},
				}
			},
		},
		{
			name: "success", end: "exit 0",
			want: func(pod string) Status {
				return Status{
					Phase: PhaseSucceeded, Message: "1/1 processes exited with code 0",
					Pods: []PodStatus{{Name: pod, ExitCode: intp(0)}},
				}
			},
		},
		{
			name: "pid file never written", end: "exit 3", dropPidFile: true,
			want: func(pod string) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 3,
					Message: fmt.Sprintf("rank 0 (pod %s) exited with code 3", pod),
					Pods:    []PodStatus{{Name: pod, ExitCode: intp(3)}},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fifo := mkfifo(t)
			old := newHarness(t, dir)
			s := newSpec(`echo before; read x < "$FIFO"; echo after; `+tt.end, 1)
			s.Envs = map[string]string{"FIFO": fifo}
			old.start(t, s)
			sup := old.pid(t, s.JobID, 0)
			waitFor(t, "the rank to start", func() bool { return old.log(t, s.JobID, 0) == "before\n" })

			h := restart(t, old, nil, func() {
				if tt.dropPidFile {
					if err := os.Remove(layout{dir}.pidFile(s.JobID, 0)); err != nil {
						t.Fatal(err)
					}
				}
			})
			if st, _ := h.e.Status(context.Background(), s.JobID); st.Phase != PhaseRunning {
				t.Fatalf("after the restart: %+v, want the rank adopted and Running", st)
			}
			if got := h.pid(t, s.JobID, 0); got.Pid != sup.Pid || got.StartTicks != sup.StartTicks {
				t.Errorf("pid file after adoption = %+v, want the supervisor's %+v", got, sup)
			}

			release(t, fifo)
			want := tt.want(s.JobID + "-0")
			got := h.waitPhase(t, s.JobID, want.Phase)
			if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
			if got := h.log(t, s.JobID, 0); got != "before\nafter\n" {
				t.Errorf("log = %q, want both lines, across the restart", got)
			}
		})
	}
}

func TestKillStopsAnAdoptedRank(t *testing.T) {
	t.Parallel()
	old := newHarness(t, t.TempDir())
	s := newSpec(`sleep 600 & echo $!; wait`, 1)
	old.start(t, s)
	sup := old.pid(t, s.JobID, 0)
	kid := childPids(t, old, s.JobID, 1)[0]
	kidInfo, err := readProc(kid)
	if err != nil {
		t.Fatal(err)
	}
	h := restart(t, old, nil, nil)

	if err := h.e.Kill(context.Background(), s.JobID); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	want := Status{
		Phase: PhaseFailed, Reason: ReasonKilled, ExitCode: 143, Message: "killed",
		Pods: []PodStatus{{Name: s.JobID + "-0", ExitCode: intp(143)}},
	}
	got, _ := h.e.Status(context.Background(), s.JobID)
	if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	if alive(kid, kidInfo.start) {
		t.Errorf("the adopted rank's child %d survives Kill", kid)
	}
	// Not our child: its reaper is the old executor's goroutine.
	waitFor(t, "the supervisor to be reaped", func() bool { return groupGone(sup.Pid) })
}

func TestRankThatEndedWhileNoExecutorRan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		killSup       bool // SIGKILL the supervisor, so nothing records the end
		killCommand   bool // SIGKILL the command's process group
		wantRecovered bool
		want          func(pod string, sup int) Status
	}{
		{
			name: "the command was killed; its supervisor recorded it", killCommand: true,
			want: func(pod string, _ int) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 137,
					Message: fmt.Sprintf("rank 0 (pod %s) was killed by signal 9 (killed)", pod),
					Pods:    []PodStatus{{Name: pod, ExitCode: intp(137)}},
				}
			},
		},
		{
			name: "the supervisor and the command were killed", killSup: true, killCommand: true, wantRecovered: true,
			want: func(pod string, sup int) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
					Message: fmt.Sprintf("rank 0's process (pid %d) ended while falcon was not running; its exit status was not recorded", sup),
					Pods:    []PodStatus{{Name: pod}},
				}
			},
		},
		{
			name: "only the supervisor was killed", killSup: true, wantRecovered: true,
			want: func(pod string, sup int) Status {
				return Status{
					Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
					Message: fmt.Sprintf("rank 0's process (pid %d) ended while falcon was not running; its exit status was not recorded"+
						" (falcon stopped the processes it left behind)", sup),
					Pods: []PodStatus{{Name: pod}},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			old := newHarness(t, dir)
			s := newSpec(`echo $$; sleep 600 & wait`, 1)
			old.start(t, s)
			sup := old.pid(t, s.JobID, 0)
			command := childPids(t, old, s.JobID, 1)[0] // the shell, leader of the rank's group
			var wantRecovered []string
			if tt.wantRecovered {
				wantRecovered = []string{s.JobID}
			}

			h := restart(t, old, wantRecovered, func() {
				if tt.killSup {
					if err := syscall.Kill(sup.Pid, syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					waitFor(t, "the supervisor to die", func() bool { return !alive(sup.Pid, sup.StartTicks) })
				}
				if tt.killCommand {
					if err := syscall.Kill(-command, syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					waitFor(t, "the command to die", func() bool { return groupGone(command) })
				}
				if !tt.killSup {
					waitFor(t, "the supervisor to record the end", func() bool {
						_, err := os.Stat(layout{dir}.exitFile(s.JobID, 0))
						return err == nil
					})
				}
			})
			got, err := h.e.Status(context.Background(), s.JobID)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want(s.JobID+"-0", sup.Pid)
			if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
			waitFor(t, "the command's group to be gone", func() bool { return groupGone(command) })
		})
	}
}

func TestRankThatFailedWhileNoExecutorRanStopsItsSiblings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := mkfifo(t)
	old := newHarness(t, dir)
	s := newSpec(`if [ "$FALCON_RANK" = 0 ]; then read x < "$FIFO"; exit 1; fi; sleep 600 & wait`, 2)
	s.Envs = map[string]string{"FIFO": fifo}
	old.start(t, s)
	sibling := old.pid(t, s.JobID, 1)

	h := restart(t, old, nil, func() {
		release(t, fifo)
		waitFor(t, "rank 0 to record its failure", func() bool {
			_, err := os.Stat(layout{dir}.exitFile(s.JobID, 0))
			return err == nil
		})
	})
	got := h.waitEnded(t, s.JobID)
	want := Status{
		Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 1,
		Message: fmt.Sprintf("rank 0 (pod %s-0) exited with code 1", s.JobID),
		Pods: []PodStatus{
			{Name: s.JobID + "-0", Rank: 0, ExitCode: intp(1)},
			{Name: s.JobID + "-1", Rank: 1, ExitCode: intp(128 + 15)},
		},
	}
	if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	waitFor(t, "the sibling's supervisor to be reaped", func() bool { return groupGone(sibling.Pid) })
}

// A Kill writes its intent before its first signal; if Falcon stops right
// after, the next executor finishes the Kill, and the job is Killed, never a
// mystery.
func TestKillInterruptedByARestartIsFinished(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := newHarness(t, dir)
	s := newSpec(`sleep 600 & wait`, 2)
	old.start(t, s)

	h := restart(t, old, nil, func() {
		if err := writeJSONAtomic(layout{dir}.stopFile(s.JobID), stopRecord{End: endKilled}); err != nil {
			t.Fatal(err)
		}
	})
	got := h.waitEnded(t, s.JobID)
	want := Status{
		Phase: PhaseFailed, Reason: ReasonKilled, ExitCode: 143, Message: "killed",
		Pods: []PodStatus{
			{Name: s.JobID + "-0", Rank: 0, ExitCode: intp(143)},
			{Name: s.JobID + "-1", Rank: 1, ExitCode: intp(143)},
		},
	}
	if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
}

func TestRecoverLeavesRecycledPidsAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mangle func(p *pidRecord)
	}{
		{name: "same pid, other start time", mangle: func(p *pidRecord) { p.StartTicks++ }},
		{name: "same process, earlier boot", mangle: func(p *pidRecord) { p.BootID = "an-earlier-boot" }},
		// Pid, start time and boot all match, but it is no supervisor of
		// this rank: only a hand-written pid file could say so.
		{name: "same process, not a supervisor", mangle: func(*pidRecord) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A process that is not ours, in a group of its own.
			stranger := exec.Command("sleep", "600")
			stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := stranger.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
			info, err := readProc(stranger.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			boot, err := bootID()
			if err != nil {
				t.Fatal(err)
			}

			// On disk: a job whose only rank's pid file names the stranger.
			dir := t.TempDir()
			l := layout{dir}
			jobID := ids.New(ids.Job)
			if err := os.MkdirAll(l.rankDir(jobID, 0), 0o755); err != nil {
				t.Fatal(err)
			}
			p := pidRecord{Pid: info.pid, StartTicks: info.start, BootID: boot}
			tt.mangle(&p)
			if err := writeJSONAtomic(l.jobFile(jobID), jobRecord{JobID: jobID, Replica: 1}); err != nil {
				t.Fatal(err)
			}
			if err := writeJSONAtomic(l.pidFile(jobID, 0), p); err != nil {
				t.Fatal(err)
			}

			h := newHarness(t, dir)
			got, err := h.e.Recover(context.Background())
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if diff := cmp.Diff([]string{jobID}, got); diff != "" {
				t.Errorf("Recover (-want +got):\n%s", diff)
			}
			if !alive(info.pid, info.start) {
				t.Error("Recover killed a process that was not the job's")
			}
			st, _ := h.e.Status(context.Background(), jobID)
			want := Status{
				Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
				Message: fmt.Sprintf("rank 0's process (pid %d) ended while falcon was not running; its exit status was not recorded", info.pid),
				Pods:    []PodStatus{{Name: jobID + "-0"}},
			}
			if diff := cmp.Diff(want, st, ignoreEnd); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRestartReportsFinishedJobsFromDisk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		finish  func(t *testing.T, h *harness, jobID string) // nil: wait for the job to end on its own
		want    Phase
	}{
		{name: "succeeded", command: "true", want: PhaseSucceeded},
		{name: "failed", command: "exit 3", want: PhaseFailed},
		{
			name: "killed", command: "sleep 600", want: PhaseFailed,
			finish: func(t *testing.T, h *harness, jobID string) {
				if err := h.e.Kill(context.Background(), jobID); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := newSpec(tt.command, 2)
			first := newHarness(t, dir)
			first.start(t, s)
			if tt.finish != nil {
				tt.finish(t, first, s.JobID)
			}
			before := first.waitEnded(t, s.JobID)
			if before.Phase != tt.want {
				t.Fatalf("job ended %s (%s), want %s", before.Phase, before.Message, tt.want)
			}
			pidFile, err := os.ReadFile(layout{dir}.pidFile(s.JobID, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := first.e.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}

			second := newHarness(t, dir)
			recovered, err := second.e.Recover(context.Background())
			if err != nil || len(recovered) != 0 {
				t.Errorf("Recover = %v, %v; want nothing to recover", recovered, err)
			}
			after, err := second.e.Status(context.Background(), s.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("Status after restart (-before +after):\n%s", diff)
			}
			if err := second.e.Start(context.Background(), s); err != nil {
				t.Fatalf("Start: %v", err)
			}
			again, _ := os.ReadFile(layout{dir}.pidFile(s.JobID, 0))
			if string(again) != string(pidFile) {
				t.Error("Start of a finished job started it again")
			}
		})
	}
}

func TestShutdownLeavesRanksRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHarness(t, dir)
	s := newSpec(`sleep 600 & wait`, 2)
	h.start(t, s)
	pids := []pidRecord{h.pid(t, s.JobID, 0), h.pid(t, s.JobID, 1)}

	if err := h.e.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, p := range pids {
		if !alive(p.Pid, p.StartTicks) {
			t.Errorf("supervisor %d did not survive Shutdown", p.Pid)
		}
	}
	if err := h.e.Start(context.Background(), newSpec("true", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Shutdown = %v, want ErrClosed", err)
	}
	if err := h.e.Kill(context.Background(), s.JobID); !errors.Is(err, ErrClosed) {
		t.Errorf("Kill after Shutdown = %v, want ErrClosed", err)
	}
	for _, p := range pids {
		if !alive(p.Pid, p.StartTicks) {
			t.Errorf("Kill after Shutdown stopped supervisor %d", p.Pid)
		}
	}
	// The next executor takes them over (and its cleanup kills them).
	next := newHarness(t, dir)
	if st := next.waitPhase(t, s.JobID, PhaseRunning); st.Message != "2/2 processes running" {
		t.Errorf("adopted job: %+v", st)
	}
}

func TestOnExitFiresAfterTheExitMarker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSpec("true", 3)
	var calls atomic.Int32
	type call struct {
		jobID   string
		n       int32 // this was the n-th callback to run
		markers int   // exit markers on disk when it ran
	}
	seen := make(chan call, 8)
	e, err := New(dir, WithLogger(slog.New(slog.DiscardHandler)), WithOnExit(func(jobID string) {
		n := calls.Add(1)
		markers, _ := filepath.Glob(filepath.Join(dir, "run", jobID, "*", "exit"))
		seen <- call{jobID, n, len(markers)}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case c := <-seen:
			// Each callback follows its own marker, so the n-th sees at least n.
			if c.jobID != s.JobID || c.markers < int(c.n) {
				t.Errorf("callback %d for %s saw %d exit markers", c.n, c.jobID, c.markers)
			}
		case <-time.After(waitTimeout):
			t.Fatal("OnExit did not fire for every rank")
		}
	}
}

func TestStartRejectsInvalidSpecs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mangle func(s *Spec)
	}{
		{"empty job id", func(s *Spec) { s.JobID = "" }},
		{"job id escaping the data dir", func(s *Spec) { s.JobID = "../job-x" }},
		{"hidden job id", func(s *Spec) { s.JobID = ".lock" }},
		{"artifact id with a slash", func(s *Spec) { s.ArtifactID = "a/b" }},
		{"no replica", func(s *Spec) { s.Replica = 0 }},
		{"empty command", func(s *Spec) { s.Command = " " }},
		{"env name with =", func(s *Spec) { s.Envs = map[string]string{"A=B": "c"} }},
		{"config with NUL", func(s *Spec) { s.Config = "a\x00b" }},
	}
	dir := t.TempDir()
	h := newHarness(t, dir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSpec("true", 1)
			tt.mangle(&s)
			if err := h.e.Start(context.Background(), s); !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Start = %v, want an errdefs.ErrInvalid", err)
			}
		})
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "run"))
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("an invalid spec left %s behind", e.Name())
		}
	}
}

func TestStatusOfAnUnknownJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, t.TempDir())
	for _, id := range []string{"job-nope", "../../etc"} {
		got, err := h.e.Status(context.Background(), id)
		if err != nil {
			t.Fatalf("Status(%q): %v", id, err)
		}
		want := Status{Phase: PhaseUnknown, Message: fmt.Sprintf("job %s is not known to the local executor", id)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Status(%q) (-want +got):\n%s", id, diff)
		}
	}
}

func TestNewRefusesADataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	quiet := WithLogger(slog.New(slog.DiscardHandler))
	first, err := New(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir, quiet); !errors.Is(err, errDataDirInUse) {
		t.Errorf("second New = %v, want errDataDirInUse", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := New(dir, quiet)
	if err != nil {
		t.Fatalf("New after Close: %v", err)
	}
	second.Close()
}

// ignoreEnd leaves out when a job ended, which these tests of real
// processes cannot know to the nanosecond: which marker dates an end is
// summarize's rule (TestSummarize, and TestEndedAtIsTheExitMarkers for
// real ranks).
var ignoreEnd = cmpopts.IgnoreFields(Status{}, "EndedAt")

// TestEndedAtIsTheExitMarkers: a job's end, as real ranks record it, is
// the last rank's exit when it succeeds and the failing rank's when it
// fails: the times the ranks' supervisors wrote.
func TestEndedAtIsTheExitMarkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHarness(t, dir)
	for _, tc := range []struct {
		name    string
		command string
		phase   Phase
		rank    int // whose marker dates the end
	}{
		{"success: the last exit", `[ "$FALCON_RANK" = 1 ] && sleep 0.3; exit 0`, PhaseSucceeded, 1},
		{"failure: the failing rank's", `[ "$FALCON_RANK" = 1 ] && exit 4; sleep 30`, PhaseFailed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSpec(tc.command, 2)
			h.start(t, s)
			got := h.waitPhase(t, s.JobID, tc.phase)
			var x exitRecord
			if err := readJSON(layout{dir}.exitFile(s.JobID, tc.rank), &x); err != nil {
				t.Fatal(err)
			}
			if got.EndedAt.IsZero() || !got.EndedAt.Equal(x.Time) {
				t.Errorf("EndedAt %v, want rank %d's exit marker %v", got.EndedAt, tc.rank, x.Time)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	exited := func(code, s int) *exitRecord { return &exitRecord{End: endExited, Code: intp(code), Time: at(s)} }
	stopped := func(end string, sig, s int) *exitRecord { return &exitRecord{End: end, Signal: sig, Time: at(s)} }
	lost := func(end string, pid int) *exitRecord { return &exitRecord{End: end, Pid: pid, Time: t0} }
	unrecorded := func(pid int, unwatched bool, detail string) *exitRecord {
		return &exitRecord{End: endUnrecorded, Pid: pid, Unwatched: unwatched, Detail: detail, Time: t0}
	}
	views := func(exits ...*exitRecord) []rankView {
		v := make([]rankView, len(exits))
		for i, x := range exits {
			v[i] = rankView{rank: i, pod: fmt.Sprintf("j-%d", i), exit: x}
		}
		return v
	}
	tests := []struct {
		name  string
		ranks []rankView
		want  Status // Pods are not compared here
	}{
		{
			name:  "running while any rank runs and none failed",
			ranks: views(exited(0, 1), nil, nil),
			want:  Status{Phase: PhaseRunning, Message: "2/3 processes running"},
		},
		{
			name:  "failed as soon as one rank fails, even with others running",
			ranks: views(nil, exited(2, 1)),
			want:  Status{Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 2, Message: "rank 1 (pod j-1) exited with code 2", EndedAt: at(1)},
		},
		{
			name:  "a shell's code for a command killed by a signal says which",
			ranks: views(nil, exited(143, 1)),
			want:  Status{Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 143, Message: "rank 1 (pod j-1) exited with code 143 (killed by SIGTERM)", EndedAt: at(1)},
		},
		{
			name:  "the earliest failure is the culprit",
			ranks: views(exited(5, 2), exited(2, 1)),
			want:  Status{Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 2, Message: "rank 1 (pod j-1) exited with code 2", EndedAt: at(1)},
		},
		{
			name:  "ranks stopped because of the failure are not culprits",
			ranks: views(stopped(endSibling, 15, 0), exited(1, 1)),
			want:  Status{Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 1, Message: "rank 1 (pod j-1) exited with code 1", EndedAt: at(1)},
		},
		{
			name:  "death by signal",
			ranks: views(stopped(endExited, 11, 0)),
			want:  Status{Phase: PhaseFailed, Reason: ReasonProcessFailed, ExitCode: 139, Message: "rank 0 (pod j-0) was killed by signal 11 (segmentation fault)", EndedAt: at(0)},
		},
		{
			name:  "killed",
			ranks: views(exited(0, 0), stopped(endKilled, 15, 1)),
			want:  Status{Phase: PhaseFailed, Reason: ReasonKilled, ExitCode: 143, Message: "killed", EndedAt: at(1)},
		},
		{
			name:  "ended while falcon was not running, naming the others that did",
			ranks: views(unrecorded(41, true, ""), nil, unrecorded(42, true, "")),
			want: Status{Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
				Message: "rank 0's process (pid 41) ended while falcon was not running; its exit status was not recorded; so did rank 2"},
		},
		{
			name:  "ended unrecorded while falcon watched",
			ranks: views(unrecorded(41, false, "its supervisor was killed by signal 9 (killed)")),
			want: Status{Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
				Message: "rank 0's process (pid 41) ended without recording its exit status (its supervisor was killed by signal 9 (killed))"},
		},
		{
			name:  "never recorded as started",
			ranks: views(exited(0, 0), unrecorded(0, true, "")),
			want: Status{Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
				Message: "rank 1 (pod j-1) has no recorded process and none runs: falcon stopped while starting it"},
		},
		{
			name:  "stopped by an older falcon when it restarted",
			ranks: views(lost(endLost, 41), lost(endLost, 0)),
			want: Status{Phase: PhaseFailed, Reason: ReasonStopped, ExitCode: -1,
				Message: "falcon stopped the job's processes when it restarted (rank 0 was pid 41, rank 1 had not recorded its pid)", EndedAt: t0},
		},
		{
			name:  "stopped by an older falcon when it shut down",
			ranks: views(lost(endShutdown, 7)),
			want: Status{Phase: PhaseFailed, Reason: ReasonStopped, ExitCode: -1,
				Message: "falcon stopped the job's processes when it shut down (rank 0 was pid 7)", EndedAt: t0},
		},
		{
			name:  "stopped for a sibling whose failure no marker records",
			ranks: views(stopped(endSibling, 15, 0)),
			want: Status{Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
				Message: "the ranks' exit markers are inconsistent: some were stopped for a failure none records"},
		},
		{
			name:  "start failed",
			ranks: views(&exitRecord{End: endStartFailed, Detail: "no such file", Time: t0}, stopped(endSibling, 0, 0)),
			want:  Status{Phase: PhaseFailed, Reason: ReasonStartFailed, ExitCode: -1, Message: "rank 0 (pod j-0) failed to start: no such file", EndedAt: t0},
		},
		{
			name:  "succeeded",
			ranks: views(exited(0, 3), exited(0, 1)),
			want:  Status{Phase: PhaseSucceeded, Message: "2/2 processes exited with code 0", EndedAt: at(3)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(tt.ranks)
			got.Pods = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("summarize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	// Field 22 (starttime) is the 20th after the command name.
	rest := " 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 12345 23 24"
	tests := []struct {
		name string
		line string
		want procInfo
	}{
		{"plain", "100 (sleep) S 1 100" + rest, procInfo{pid: 100, state: 'S', ppid: 1, pgrp: 100, sid: 6, start: 12345}},
		{"command with spaces and parens", "100 (a) b) (c) Z 7 99" + rest, procInfo{pid: 100, state: 'Z', ppid: 7, pgrp: 99, sid: 6, start: 12345}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(100, []byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(procInfo{})); diff != "" {
				t.Errorf("parseStat (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := parseStat(1, []byte("1 (x) S 1")); err == nil {
		t.Error("parseStat accepted a truncated line")
	}
}

// The API rejects tasks that set Falcon's variables, using its own list; the
// two lists must name the same variables or a task could shadow one.
func TestFalconEnvsAreTheReservedOnes(t *testing.T) {
	if diff := cmp.Diff(slices.Sorted(slices.Values(validation.ReservedEnvs)), slices.Sorted(slices.Values(falconEnvs))); diff != "" {
		t.Errorf("reserved env vars (-validation +executor):\n%s", diff)
	}
}

func TestRankThatCannotStartFailsTheJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHarness(t, dir)
	s := newSpec(`sleep 600`, 3)
	// Rank 1's log cannot be opened: a directory stands where it goes.
	if err := os.MkdirAll(h.e.LogPath(s.JobID, s.JobID+"-1"), 0o755); err != nil {
		t.Fatal(err)
	}

	err := h.e.Start(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("Start = %v, want an error naming rank 1", err)
	}
	rank0 := h.pid(t, s.JobID, 0)
	got := h.waitEnded(t, s.JobID)
	if !groupGone(rank0.Pid) {
		t.Errorf("rank 0 (process group %d) survives its sibling's failed start", rank0.Pid)
	}
	want := Status{
		Phase: PhaseFailed, Reason: ReasonStartFailed, ExitCode: -1,
		Message: fmt.Sprintf("rank 1 (pod %s-1) failed to start: open %s: is a directory", s.JobID, h.e.LogPath(s.JobID, s.JobID+"-1")),
		Pods: []PodStatus{
			{Name: s.JobID + "-0", Rank: 0, ExitCode: intp(128 + 15)},
			{Name: s.JobID + "-1", Rank: 1},
			{Name: s.JobID + "-2", Rank: 2},
		},
	}
	if diff := cmp.Diff(want, got, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	// The failure is the job's outcome, not a reason to try again.
	if err := h.e.Start(context.Background(), s); err != nil {
		t.Errorf("second Start = %v, want nil", err)
	}
	if _, err := os.Stat(layout{dir}.pidFile(s.JobID, 2)); !os.IsNotExist(err) {
		t.Errorf("rank 2 was started after rank 1 failed to start (pid file: %v)", err)
	}
}

// A rank an older Falcon started ran its command with no supervisor, so
// nothing will ever record how it ends: it is stopped, and the job says why.
func TestRankOfAnOlderFalconIsStoppedAndSaysSo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := layout{dir}
	jobID := ids.New(ids.Job)
	old := exec.Command("/bin/sh", "-c", "sleep 600 & wait")
	old.Env = []string{envJobID + "=" + jobID, envRank + "=0"}
	old.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Process.Kill(); old.Wait() })
	// Its environment is readable once it has exec'd.
	waitFor(t, "the old rank to start", func() bool { return environHas(old.Process.Pid, envJobID+"="+jobID) })
	info, err := readProc(old.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := bootID()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(l.rankDir(jobID, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(l.jobFile(jobID), jobRecord{JobID: jobID, Replica: 1}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(l.pidFile(jobID, 0), pidRecord{Pid: info.pid, StartTicks: info.start, BootID: boot}); err != nil {
		t.Fatal(err)
	}

	h := newHarness(t, dir)
	got, err := h.e.Recover(context.Background())
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if diff := cmp.Diff([]string{jobID}, got); diff != "" {
		t.Errorf("Recover (-want +got):\n%s", diff)
	}
	st, _ := h.e.Status(context.Background(), jobID)
	want := Status{
		Phase: PhaseFailed, Reason: ReasonUnrecorded, ExitCode: -1,
		Message: fmt.Sprintf("rank 0's process (pid %d) ended without recording its exit status"+
			" (an older falcon started it without a supervisor, so its exit status cannot be known; falcon stopped it)", info.pid),
		Pods: []PodStatus{{Name: jobID + "-0"}},
	}
	if diff := cmp.Diff(want, st, ignoreEnd); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	if alive(info.pid, info.start) {
		t.Error("the old rank still runs")
	}
}
