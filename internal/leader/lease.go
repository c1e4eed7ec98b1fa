package leader

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Lease elects a leader with a coordination.k8s.io/v1 Lease through
// client-go's leaderelection, with ReleaseOnCancel so a graceful stop hands
// over at once.
type Lease struct {
	client              kubernetes.Interface
	namespace, name, id string
	o                   options
}

var _ Elector = (*Lease)(nil)

// NewLease returns an elector on the Lease namespace/name, campaigning as
// identity (unique per replica: DefaultIdentity). It uses the timing and
// logger options; client-go keeps its own clock.
func NewLease(client kubernetes.Interface, namespace, name, identity string, opts ...Option) (*Lease, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if namespace == "" || name == "" || identity == "" {
		return nil, errors.New("a Lease elector needs a namespace, a name and an identity")
	}
	return &Lease{client: client, namespace: namespace, name: name, id: identity, o: o}, nil
}

// Run campaigns until ctx is done; see Elector.
func (l *Lease) Run(ctx context.Context, lead func(context.Context)) error {
	for ctx.Err() == nil {
		if err := l.campaign(ctx, lead); err != nil {
			return err
		}
	}
	return nil
}

// term is one campaign and, if it is won, one term of leadership. It
// orders lead against client-go: client-go starts OnStartedLeading in a
// goroutine and, when renewal fails, releases the Lease before it cancels
// that goroutine's context. term cancels lead and waits for it before any
// release, and refuses to start lead once the campaign is over.
type term struct {
	mu      sync.Mutex
	leading bool // lead is running
	over    bool // no lead may start any more
	done    chan struct{}
	lose    context.CancelCauseFunc
}

// start reports whether lead may run now.
func (t *term) start() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return false
	}
	t.leading = true
	return true
}

// end cancels lead, if it runs, and waits for it to return; no lead starts
// afterwards.
func (t *term) end() {
	t.mu.Lock()
	t.over = true
	leading := t.leading
	t.mu.Unlock()
	t.lose(ErrLost)
	if leading {
		<-t.done
	}
}

func (l *Lease) campaign(ctx context.Context, lead func(context.Context)) error {
	// client-go runs on its own context, cancelled after lead has drained
	// (or at once for a standby), because cancelling it stops renewals and
	// releases the Lease.
	ectx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	ectx = klog.NewContext(ectx, logr.FromSlogHandler(l.o.log.Handler()))
	held, lose := context.WithCancelCause(ectx)
	t := &term{done: make(chan struct{}), lose: lose}

	lock := &gatedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.namespace, Name: l.name},
		Client:     l.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.id},
	}, beforeRelease: t.end}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            l.name,
		LeaseDuration:   l.o.timing.LeaseDuration,
		RenewDeadline:   l.o.timing.RenewDeadline,
		RetryPeriod:     l.o.timing.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(c context.Context) {
				if ctx.Err() != nil || !t.start() {
					stop() // won just as we were told to stop: hand it back
					return
				}
				defer close(t.done)
				// client-go cancels c when renewal ends; lead must stop then.
				unhook := context.AfterFunc(c, func() { lose(ErrLost) })
				defer unhook()
				lead(held)
				// Lead returned (drained after ctx ended, or gave up):
				// release now rather than let the Lease expire.
				stop()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	// A standby stops campaigning as soon as ctx ends; a leader's lead sees
	// ctx itself and stops the elector once drained.
	unwatch := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.leading {
			t.over = true
			stop()
		}
	})
	defer unwatch()
	le.Run(ectx)
	t.end()
	return nil
}

// gatedLock makes client-go's release wait until lead has returned: a
// release (an Update with no holder) lets a standby start at once, so the
// old term must be over first.
type gatedLock struct {
	resourcelock.Interface
	beforeRelease func()
}

func (g *gatedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if r.HolderIdentity == "" {
		g.beforeRelease()
	}
	return g.Interface.Update(ctx, r)
}
