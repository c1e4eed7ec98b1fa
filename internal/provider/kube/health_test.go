package kube

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

func TestHealthFollowsFailures(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New()
	b.now = func() time.Time { return now }
	c := &falconv1.Cluster{Name: "edge-a"}
	e := &edge{key: connKey(c)}
	b.edges[c.GetName()] = e
	refused := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")

	steps := []struct {
		name    string
		do      func()
		err     error
		backoff bool
	}{
		{"nothing happened", func() {}, nil, false},
		{"a watch the apiserver closed is routine", func() { e.watchFailed(now, io.EOF) }, nil, false},
		{"an expired watch is routine", func() { e.watchFailed(now, apierrors.NewResourceExpired("too old")) }, nil, false},
		{"a watch that cannot connect backs calls off", func() { e.watchFailed(now, refused) }, refused, true},
		{"the backoff ends, the failure is still reported", func() { now = now.Add(5 * time.Second) }, refused, false},
		{"a failed call backs off again", func() { e.record(now, refused) }, refused, true},
		{"a failure long ago is forgotten", func() { now = now.Add(healthMemory) }, nil, false},
		{"a call the server answered clears it", func() {
			e.record(now, refused)
			e.record(now, apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "x"))
		}, nil, false},
		{"a re-registered cluster is a new connection", func() {
			e.record(now, refused)
			c = &falconv1.Cluster{Name: "edge-a", Namespace: "other"}
		}, nil, false},
	}
	for _, s := range steps {
		s.do()
		if got := b.Health(c); !errors.Is(got.Err, s.err) || got.Backoff != s.backoff {
			t.Fatalf("%s: Health = %+v, want error %v, backoff %v", s.name, got, s.err, s.backoff)
		}
	}
}

// A cluster whose apiserver refuses connections: the first call fails, the
// cluster reports why and is in backoff, and a broken kubeconfig is
// reported the same way.
func TestUnreachableClusterReportsHealth(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused

	now := time.Unix(1000, 0)
	b := New(WithRESTConfig(func(c *falconv1.Cluster) (*rest.Config, error) {
		if c.GetKubeContext() == "missing" {
			return nil, errors.New(`context "missing" does not exist`)
		}
		return &rest.Config{Host: "http://" + addr}, nil
	}))
	b.now = func() time.Time { return now }
	t.Cleanup(b.Close)

	tests := []struct {
		name    string
		cluster *falconv1.Cluster
		err     string
		backoff bool
	}{
		{"refused", &falconv1.Cluster{Name: "down"}, "connection refused", true},
		{"broken kubeconfig", &falconv1.Cluster{Name: "broken", KubeContext: "missing"}, "does not exist", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if h := b.Health(tt.cluster); h != (resourcemanager.Health{}) {
				t.Fatalf("before any call: %+v", h)
			}
			job := &falconv1.Job{Id: "job-1", TaskSpec: &falconv1.TaskSpec{Replica: 1}}
			if _, err := b.Observe(context.Background(), tt.cluster, job); err == nil {
				t.Fatal("Observe reached a cluster that is not there")
			}
			h := b.Health(tt.cluster)
			if h.Err == nil || !strings.Contains(h.Err.Error(), tt.err) || h.Backoff != tt.backoff {
				t.Fatalf("Health = %+v, want an error containing %q, backoff %v", h, tt.err, tt.backoff)
			}
		})
	}
}
