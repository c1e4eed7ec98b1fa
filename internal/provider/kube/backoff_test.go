package kube

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestUnreachableClusterBacksOffAndRecovers(t *testing.T) {
	e := &edge{}
	now := time.Unix(1000, 0)
	refused := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")

	if err := e.check(now); err != nil {
		t.Fatalf("fresh edge: %v", err)
	}
	// An answer from the server, even an error, is not unreachability.
	e.record(now, apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "x"))
	if err := e.check(now); err != nil {
		t.Fatalf("after NotFound: %v", err)
	}
	var waits []time.Duration
	for i := 0; i < 8; i++ {
		e.record(now, refused)
		waits = append(waits, e.retryAt.Sub(now))
		err := e.check(now)
		if err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("during backoff: %v, want a fast failure naming the cause", err)
		}
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] < waits[i-1] {
			t.Fatalf("backoff shrank: %v", waits)
		}
	}
	if waits[0] != time.Second || waits[len(waits)-1] != time.Minute {
		t.Fatalf("backoff %v, want 1s doubling up to 1m", waits)
	}
	if err := e.check(now.Add(time.Minute)); err != nil {
		t.Fatalf("after the backoff: %v", err)
	}
	e.record(now, nil)
	if e.failures != 0 || e.check(now) != nil {
		t.Fatal("a success did not reset the backoff")
	}
	if !unreachable(apierrors.NewServiceUnavailable("down")) || unreachable(apierrors.NewBadRequest("no")) {
		t.Fatal("unreachable() misclassifies API errors")
	}
}
