package leader_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/falconhq/falcon/internal/leader"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// partition fails every request while cut: a replica cut off from the
// API server, or dead, as far as the Lease can tell.
type partition struct {
	next http.RoundTripper
	cut  *atomic.Bool
}

func (p partition) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.cut.Load() {
		return nil, errors.New("partitioned from the API server")
	}
	return p.next.RoundTrip(r)
}

// TestLeaseFailover runs the election against a real kube-apiserver: one of
// two replicas leads; a graceful stop hands the Lease over at once; a
// leader cut off from the API server steps down before the Lease expires
// and the standby leads within the bound, never both at once.
func TestLeaseFailover(t *testing.T) {
	cl := kubeenv.Start(t) // never skips: builds the binaries or fails
	const ns, name = "default", "falcon-controller"
	newLease := func(id string) (*leader.Lease, *atomic.Bool) {
		cut := &atomic.Bool{}
		rc := cl.RESTConfig()
		rc.Timeout = leader.DefaultTiming.RenewDeadline
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return partition{rt, cut} })
		e, err := leader.NewLease(kubernetes.NewForConfigOrDie(rc), ns, name, id)
		if err != nil {
			t.Fatal(err)
		}
		return e, cut
	}
	holder := func() string {
		l, err := cl.Clientset().CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *l.Spec.HolderIdentity
	}
	ref := newReferee(t)
	ea, cutA := newLease("a")
	eb, cutB := newLease("b")
	a, b := ref.campaign("a", ea), ref.campaign("b", eb)
	l1, _ := first(t, takeoverBound, a, b)
	if got := holder(); got != l1.name {
		t.Fatalf("Lease holder %q, but %s leads", got, l1.name)
	}

	// Graceful: ReleaseOnCancel empties the Lease once lead has returned.
	stopped := time.Now()
	l1.stop()
	if cause := ended(t, l1, 5*time.Second); cause != nil {
		t.Fatalf("%s's lead ended with cause %v on a graceful stop, want none", l1.name, cause)
	}
	l2, at := first(t, takeoverBound, other(l1, a, b))
	graceful := at.Sub(stopped)
	if graceful >= leader.DefaultTiming.LeaseDuration {
		t.Errorf("graceful handover took %s: the Lease was not released", graceful)
	}

	// Partitioned: the leader can no longer renew.
	ec, _ := newLease("c")
	c := ref.campaign("c", ec)
	cut := map[*candidate]*atomic.Bool{a: cutA, b: cutB}[l2]
	partitioned := time.Now()
	cut.Store(true)
	if cause := ended(t, l2, leader.DefaultTiming.RenewDeadline+3*time.Second); !errors.Is(cause, leader.ErrLost) {
		t.Fatalf("%s's lead ended with cause %v once partitioned, want ErrLost", l2.name, cause)
	}
	stepDown := time.Since(partitioned)
	_, at = first(t, takeoverBound, c)
	takeover := at.Sub(partitioned)
	if got := holder(); got != "c" {
		t.Errorf("Lease holder %q after the takeover, want c", got)
	}
	t.Logf("lease election: graceful handover %s; a partitioned leader stepped down after %s, the standby led %s after the partition",
		graceful.Round(time.Millisecond), stepDown.Round(time.Millisecond), takeover.Round(time.Millisecond))
}
