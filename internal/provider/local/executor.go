package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Spec is what to run for one Falcon job.
type Spec struct {
	ExpID, JobID, ArtifactID, Role string
	Command                        string // run as /bin/sh -c "$Command"
	Replica                        int    // number of ranks (processes), >= 1
	// Slices above 1 splits the ranks into that many slices of
	// Replica/Slices hosts each, numbered in order (rank r is in slice
	// r/(Replica/Slices)), and gives every rank the MEGASCALE_* variables
	// JAX multislice reads, as the clusters do.
	Slices int
	Envs   map[string]string // the task's own env vars
	Config string            // experiment config string -> CUSTOM_CONFIG_KEY
}

// The variables Falcon sets for every rank. A task cannot override them (see
// jobEnv): a process must always see its true identity and artifact dir.
const (
	envExpID       = "FALCON_EXP_ID"
	envJobID       = "FALCON_JOB_ID"
	envRole        = "FALCON_ROLE"
	envRank        = "FALCON_RANK"
	envWorldSize   = "FALCON_WORLD_SIZE"
	envArtifactDir = "FALCON_ARTIFACT_DIR"
	envArtifactAlt = "ARTIFACT_LOCAL_DIR"
	envConfig      = "CUSTOM_CONFIG_KEY"
)

var falconEnvs = []string{envExpID, envJobID, envRole, envRank, envWorldSize, envArtifactDir, envArtifactAlt, envConfig}

// Clock is the executor's view of time: it stamps the records the executor
// writes itself and measures the kill grace period, so tests can step past a
// grace period instead of waiting it out. Exit markers written by a rank's
// supervisor, another process, carry real time; so does polling for the
// kernel to finish killing processes.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

const (
	defaultKillGrace = 5 * time.Second
	// pollInterval paces the few waits the kernel cannot notify us about:
	// the members of a process group dying after SIGKILL.
	pollInterval = 20 * time.Millisecond
	// killWait bounds how long SIGKILLed processes may take to die before we
	// report them as unkillable (stuck in the kernel) instead of hanging.
	killWait = 10 * time.Second
)

// ErrClosed is returned by Start and Kill after Shutdown or Close.
var ErrClosed = fmt.Errorf("local executor is shut down: %w", errdefs.ErrUnavailable)

var errDataDirInUse = errors.New("data directory is in use by another Falcon process")

// Option configures an Executor.
type Option func(*Executor)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(e *Executor) { e.log = l } }

// WithOnExit registers f to be called, on its own goroutine, after the exit
// marker of any rank of a job has been written, so a controller can
// reconcile that job at once instead of at its next poll. f must not block
// forever: Shutdown waits for it.
func WithOnExit(f func(jobID string)) Option { return func(e *Executor) { e.onExit = f } }

// WithExtraEnv replaces the base environment every rank starts from (default
// os.Environ() at New). The task's env vars and Falcon's are added on top.
func WithExtraEnv(base []string) Option {
	return func(e *Executor) { e.baseEnv = slices.Clone(base) }
}

// WithKillGrace sets how long Kill waits after SIGTERM before SIGKILL
// (default 5s).
func WithKillGrace(d time.Duration) Option { return func(e *Executor) { e.killGrace = d } }

// WithClock injects the clock (default the real one).
func WithClock(c Clock) Option { return func(e *Executor) { e.clock = c } }

// Executor runs jobs as local process groups. It is safe for concurrent use.
// Every method is keyed by job ID and idempotent.
type Executor struct {
	layout    layout
	log       *slog.Logger
	onExit    func(jobID string)
	baseEnv   []string
	killGrace time.Duration
	clock     Clock
	boot      string

	owner      string // the data directory with symlinks resolved
	lockFile   *os.File
	unlockOnce sync.Once

	mu     sync.Mutex
	jobs   map[string]*job
	closed bool
	wg     sync.WaitGroup // watchers, background stops and callbacks

	// detached is closed by Shutdown: from then on the executor watches,
	// signals and records nothing, and leaves the ranks to the next one.
	detached   chan struct{}
	detachOnce sync.Once
}

// New returns an Executor that owns dataDir (created if missing). It fails if
// another live Executor owns it. Call Recover once before using it.
func New(dataDir string, opts ...Option) (*Executor, error) {
	if err := platformSupported(); err != nil {
		return nil, err
	}
	if dataDir == "" {
		return nil, errors.New("local executor: empty data directory")
	}
	// Ranks run in their own directories, so every path handed to them
	// (FALCON_ARTIFACT_DIR) must be absolute.
	root, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	e := &Executor{
		layout:    layout{root: root},
		log:       slog.Default(),
		baseEnv:   os.Environ(),
		killGrace: defaultKillGrace,
		clock:     realClock{},
		jobs:      map[string]*job{},
		detached:  make(chan struct{}),
	}
	for _, o := range opts {
		o(e)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	// One directory, one key in ownedDirs, however it was spelt. The paths
	// handed to jobs keep the caller's spelling.
	if e.owner, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	if e.boot, err = bootID(); err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	for _, d := range []string{e.layout.runDir(), filepath.Join(root, "logs"), filepath.Join(root, "experiments")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("local executor: %w", err)
		}
	}
	if err := e.lock(); err != nil {
		return nil, fmt.Errorf("local executor: %s: %w", root, err)
	}
	return e, nil
}

// ownedDirs are the data directories owned by Executors of this process; the
// file lock only keeps other processes out.
var ownedDirs = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func (e *Executor) lock() error {
	ownedDirs.Lock()
	defer ownedDirs.Unlock()
	if ownedDirs.m[e.owner] {
		return errDataDirInUse
	}
	f, err := os.OpenFile(e.layout.lockFile(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := lockDir(f); err != nil {
		f.Close()
		return err
	}
	ownedDirs.m[e.owner] = true
	e.lockFile = f
	return nil
}

// unlock releases the data directory; the lock goes with the file.
func (e *Executor) unlock() {
	e.unlockOnce.Do(func() {
		ownedDirs.Lock()
		defer ownedDirs.Unlock()
		e.lockFile.Close()
		delete(ownedDirs.m, e.owner)
	})
}

// Start starts the job's ranks. It does nothing and returns nil if the job is
// already known, running or finished, from this process or from the data
// directory; concurrent Starts of one job start it once. An error means
// nothing was started, except when a rank fails to start after others did:
// then the job is recorded as Failed (ReasonStartFailed), the started ranks
// are stopped, and the error says which rank failed.
func (e *Executor) Start(ctx context.Context, s Spec) error {
	if err := s.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := e.acquire(ctx, s.JobID, &s)
	return err
}

// Status reports the job. A job the executor has never heard of is
// PhaseUnknown, not an error. If the job was left running by an earlier
// Falcon process and Recover has not dealt with it yet, Status adopts it
// first (see Recover).
func (e *Executor) Status(ctx context.Context, jobID string) (Status, error) {
	unknown := Status{Phase: PhaseUnknown, Message: fmt.Sprintf("job %s is not known to the local executor", jobID)}
	if !validName(jobID) {
		return unknown, nil
	}
	j, err := e.acquire(ctx, jobID, nil)
	if err != nil {
		return Status{}, err
	}
	if j == nil {
		return unknown, nil
	}
	return summarize(j.views()), nil
}

// Kill stops every rank of the job that still runs, whichever executor
// started it: it records that the job is being killed, has each rank's
// supervisor SIGTERM its process group and SIGKILL what is left after the
// grace period, and returns once all of them are gone. If ctx ends first,
// Kill returns its error and the escalation stops; call it again to finish.
// Afterwards the job is Failed with ReasonKilled, unless it had already
// ended. Killing an unknown or finished job does nothing; after Shutdown,
// Kill fails with ErrClosed.
func (e *Executor) Kill(ctx context.Context, jobID string) error {
	if !validName(jobID) {
		return nil
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		// The ranks now belong to whichever executor owns the directory next.
		return ErrClosed
	}
	j, err := e.acquire(ctx, jobID, nil)
	if err != nil || j == nil {
		return err
	}
	return e.stop(ctx, j, endKilled)
}

// Recover loads every job an earlier Falcon process left unfinished in the
// data directory. Ranks whose supervisors still run are adopted: watched
// until they end, and reported with the exit status their supervisors
// record. Ranks whose supervisors ended without recording it (they were
// SIGKILLed while no Falcon ran) are recorded as ended unrecorded, after
// anything they left running is killed. Recover returns the IDs (sorted) of
// the jobs with such ranks, so the controller can reconcile them. Call it
// once, at startup, so adopted ranks wake the controller when they end.
//
// A pid file alone does not prove a process is ours: the pid may have been
// recycled. A supervisor is adopted only if it still has the recorded start
// time in the same boot and carries the rank's environment; see adopt.
func (e *Executor) Recover(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(e.layout.runDir())
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		ids  []string
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8) // each job may wait out a kill grace period
	)
	for _, ent := range entries {
		if !ent.IsDir() || !validName(ent.Name()) {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			j, err := e.acquire(ctx, ent.Name(), nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("recover job %s: %w", ent.Name(), err))
			case j != nil && j.wasRecovered():
				ids = append(ids, j.id)
			}
		})
	}
	wg.Wait()
	slices.Sort(ids)
	return ids, errors.Join(errs...)
}

// LogPath is where the pod's stdout and stderr go.
func (e *Executor) LogPath(jobID, pod string) string { return e.layout.logFile(jobID, pod) }

// Shutdown stops watching, waits for the executor's goroutines to finish,
// and releases the data directory. Running ranks are left running: their
// supervisors record how they end, and the next Executor on the data
// directory adopts them (see Recover). A Kill in progress returns ErrClosed
// with its intent recorded, and the next Executor finishes it. Start fails
// with ErrClosed afterwards; Status keeps answering from what was known.
func (e *Executor) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	jobs := slices.Collect(maps.Values(e.jobs))
	e.mu.Unlock()
	e.detachOnce.Do(func() { close(e.detached) })
	// Wakes the watchers of adopted ranks. A job still loading adopts
	// nothing more: it finds the executor closed.
	for _, j := range jobs {
		select {
		case <-j.ready:
		default:
			continue
		}
		j.mu.Lock()
		for _, r := range j.ranks {
			if r.pfd != nil {
				r.pfd.close()
			}
		}
		j.mu.Unlock()
	}
	var err error
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.unlock()
	return err
}

// Close is Shutdown without a deadline.
func (e *Executor) Close() error { return e.Shutdown(context.Background()) }

// hold counts one more goroutine in e.wg, unless Shutdown has begun. Taking
// the slot under e.mu, before anything is started, guarantees that Shutdown's
// wait never misses a goroutine and never races with its Add.
func (e *Executor) hold() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	return true
}

// spawn runs f on a goroutine Shutdown waits for. Once Shutdown has begun
// nothing new is spawned: Shutdown stops every job itself, and waking a
// controller that is shutting down helps nobody.
func (e *Executor) spawn(f func()) {
	if e.hold() {
		go func() {
			defer e.wg.Done()
			f()
		}()
	}
}

func (e *Executor) notify(jobID string) {
	if e.onExit != nil {
		e.spawn(func() { e.onExit(jobID) })
	}
}

// validName accepts IDs that are safe as one path component: no separators,
// no "." or "..", no hidden names (which keeps them apart from run/.lock).
func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '-' || c == '_' || c == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

func (s Spec) validate() error {
	var errs errdefs.FieldErrors
	for _, f := range []struct{ field, v string }{{"expID", s.ExpID}, {"jobID", s.JobID}, {"artifactID", s.ArtifactID}} {
		if !validName(f.v) {
			errs.Add(f.field, "must be 1-128 characters of [A-Za-z0-9._-] starting with a letter or digit, got %q", f.v)
		}
	}
	if s.Replica < 1 {
		errs.Add("replica", "must be at least 1, got %d", s.Replica)
	}
	if s.Slices > 1 && s.Replica%s.Slices != 0 {
		errs.Add("slices", "%d slices do not divide %d ranks evenly", s.Slices, s.Replica)
	}
	if strings.TrimSpace(s.Command) == "" {
		errs.Add("command", "must not be empty")
	}
	// exec(2) cannot pass a NUL; catching it here keeps it from becoming a
	// half-started job.
	for field, v := range map[string]string{"command": s.Command, "role": s.Role, "config": s.Config} {
		if strings.ContainsRune(v, 0) {
			errs.Add(field, "must not contain NUL")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Envs)) {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(s.Envs[k], 0) {
			errs.Add("envs."+k, "name must be non-empty without '=' or NUL, and the value without NUL")
		}
	}
	return errs.Err()
}

// jobEnv is the environment shared by all ranks of s (FALCON_RANK is added
// per rank). Falcon's variables come last because os/exec keeps the last
// value of a repeated name, so neither the task nor the base environment (a
// Falcon that itself runs inside a job, say) can override them. The API
// already rejects tasks that set them; a task that still does is logged.
func (e *Executor) jobEnv(s Spec, artifactDir string) []string {
	env := slices.Clone(e.baseEnv)
	for _, k := range slices.Sorted(maps.Keys(s.Envs)) {
		if slices.Contains(falconEnvs, k) {
			e.log.Warn("ignoring task env var that Falcon sets itself", "job", s.JobID, "name", k)
			continue
		}
		env = append(env, k+"="+s.Envs[k])
	}
	return append(env,
		envExpID+"="+s.ExpID,
		envJobID+"="+s.JobID,
		envRole+"="+s.Role,
		envWorldSize+"="+fmt.Sprint(s.Replica),
		envArtifactDir+"="+artifactDir,
		envArtifactAlt+"="+artifactDir,
		envConfig+"="+s.Config,
	)
}

// Multislice variables. On this machine every slice's rank 0 is
// 127.0.0.1, so the coordinator is too; the port is the one JAX's
// multislice runtime uses by default.
const (
	envMegascaleCoordinator = "MEGASCALE_COORDINATOR_ADDRESS"
	envMegascalePort        = "MEGASCALE_PORT"
	envMegascaleNumSlices   = "MEGASCALE_NUM_SLICES"
	envMegascaleSliceID     = "MEGASCALE_SLICE_ID"
	megascalePort           = "8081"
)

// rankEnv is what rank i adds to the job's environment: its FALCON_RANK
// and, on a multi-slice job, its slice.
func (s Spec) rankEnv(i int) []string {
	env := []string{envRank + "=" + strconv.Itoa(i)}
	if s.Slices > 1 {
		env = append(env,
			envMegascaleCoordinator+"=127.0.0.1:"+megascalePort,
			envMegascalePort+"="+megascalePort,
			envMegascaleNumSlices+"="+strconv.Itoa(s.Slices),
			envMegascaleSliceID+"="+strconv.Itoa(i/(s.Replica/s.Slices)),
		)
	}
	return env
}

func podName(jobID string, rank int) string { return fmt.Sprintf("%s-%d", jobID, rank) }
