package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// Elector campaigns for leadership among the replicas that share its lock.
type Elector interface {
	// Run campaigns until ctx is done. Each time this replica wins, Run calls
	// lead with a context that is cancelled, with cause ErrLost, when
	// leadership is lost; it waits for lead to return before it releases
	// leadership or campaigns again, so two terms of this replica never
	// overlap.
	//
	// When ctx ends while leading, lead's context stays live and leadership
	// is kept until lead returns: lead is expected to watch ctx as well,
	// drain and return. Run then releases leadership at once and returns
	// nil. A standby returns as soon as ctx ends.
	Run(ctx context.Context, lead func(ctx context.Context)) error
}

// ErrLost is the cause of lead's context when leadership was lost.
var ErrLost = errors.New("leadership lost")

// Timing paces an election, with the meanings client-go gives them.
type Timing struct {
	// LeaseDuration is how long the others wait, after last hearing from a
	// leader, before they may take over: the bound on takeover after a
	// leader dies without releasing. Whole seconds (Kubernetes stores
	// seconds; MySQL's wait_timeout too).
	LeaseDuration time.Duration
	// RenewDeadline is how long a leader keeps leading without a successful
	// renewal (a check of its lock); it gives up before LeaseDuration so it
	// has stopped by the time another may start.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try to acquire and the leader
	// renews.
	RetryPeriod time.Duration
}

// DefaultTiming bounds takeover after a leader's death by about 12.4 s on a
// Lease (8 s plus two jittered retries) and 13 s on MySQL, and leaves a
// leader that lost touch 3 s to stop before anyone else may start.
var DefaultTiming = Timing{LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second}

// jitter is client-go's JitterFactor: candidates wait between RetryPeriod
// and (1+jitter)*RetryPeriod, and a renewal must fit in RenewDeadline.
const jitter = 1.2

// TimingError says which Timing field is wrong; callers map Field to their
// flag.
type TimingError struct {
	Field string // LeaseDuration, RenewDeadline or RetryPeriod
	Msg   string
}

func (e *TimingError) Error() string { return e.Field + " " + e.Msg }

// Validate checks the relations client-go demands (and MySQL relies on):
// LeaseDuration > RenewDeadline > 1.2 * RetryPeriod > 0.
func (t Timing) Validate() error {
	switch {
	case t.RetryPeriod <= 0:
		return &TimingError{"RetryPeriod", fmt.Sprintf("must be positive, got %s", t.RetryPeriod)}
	case t.RenewDeadline <= time.Duration(jitter*float64(t.RetryPeriod)):
		return &TimingError{"RenewDeadline", fmt.Sprintf("must exceed %.1f x the retry period (%s), got %s", jitter, t.RetryPeriod, t.RenewDeadline)}
	case t.LeaseDuration <= t.RenewDeadline:
		return &TimingError{"LeaseDuration", fmt.Sprintf("must exceed the renew deadline (%s), got %s", t.RenewDeadline, t.LeaseDuration)}
	case t.LeaseDuration%time.Second != 0:
		return &TimingError{"LeaseDuration", fmt.Sprintf("must be whole seconds, got %s", t.LeaseDuration)}
	}
	return nil
}

// Clock is an elector's view of time, injected so tests can fire its
// retries and checks without waiting. k8s.io/utils/clock's clocks fit.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// options are shared by the implementations; each documents which it uses.
type options struct {
	timing Timing
	clock  Clock
	log    *slog.Logger
}

// Option configures an elector.
type Option func(*options)

// WithTiming sets lease duration, renew deadline and retry period (default
// DefaultTiming). Validate them first: constructors refuse invalid ones.
func WithTiming(t Timing) Option { return func(o *options) { o.timing = t } }

// WithClock injects the clock (default the real one). client-go's elector
// keeps its own, so only the MySQL elector's retries and checks follow it.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) (options, error) {
	o := options{timing: DefaultTiming, clock: realClock{}, log: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	return o, o.timing.Validate()
}

// DefaultIdentity names this replica in a Lease: the pod's name when the
// deployment passes it in POD_NAME, else hostname_pid, which stays unique
// when several replicas share a machine.
func DefaultIdentity() string {
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	h, err := os.Hostname()
	if err != nil {
		h = "unknown"
	}
	return h + "_" + strconv.Itoa(os.Getpid())
}

// Always leads at once and for good: the elector of a single replica and
// of `falcon dev`.
type Always struct{}

var _ Elector = Always{}

// Run calls lead once, with a context that is never lost, and returns when
// lead does.
func (Always) Run(ctx context.Context, lead func(context.Context)) error {
	lead(context.WithoutCancel(ctx))
	return nil
}
