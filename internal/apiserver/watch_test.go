package apiserver_test

import (
	"context"
	"fmt"
	"testing"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// WatchChanges numbers every write and names its experiment; a watcher that
// comes back with this server's epoch and the last seq it saw is replayed
// what it missed, and one that names another epoch is told to resync.
func TestWatchChangesResumes(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(req *falconv1.WatchChangesRequest) falconv1.JobService_WatchChangesClient {
		t.Helper()
		s, err := env.Jobs.WatchChanges(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	recv := func(s falconv1.JobService_WatchChangesClient) *falconv1.Change {
		t.Helper()
		c, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	hello := recv(open(&falconv1.WatchChangesRequest{}))
	if hello.GetKind() != "" || hello.GetEpoch() == "" {
		t.Fatalf("first message %v, want a hello with the epoch", hello)
	}
	var exps []string
	for i := range 3 {
		exps = append(exps, env.Create(t, fmt.Sprintf("w-%d", i), cpuRole).GetId())
	}

	s := open(&falconv1.WatchChangesRequest{Epoch: hello.GetEpoch(), Since: hello.GetSeq()})
	if h := recv(s); h.GetKind() != "" {
		t.Fatalf("resumed stream starts with %v, want the hello", h)
	}
	for i, id := range exps {
		c := recv(s)
		if c.GetKind() != "experiment" || c.GetExpId() != id || c.GetSeq() != hello.GetSeq()+int64(i)+1 {
			t.Fatalf("replayed change %d = %v, want experiment %s numbered %d", i, c, id, hello.GetSeq()+int64(i)+1)
		}
	}
	// Live changes follow the replay on the same stream, with the job's
	// experiment named.
	j := env.Create(t, "w-live", cpuRole).GetJobs()[0]
	if c := recv(s); c.GetExpId() != j.GetExpId() {
		t.Fatalf("live change %v, want experiment %s", c, j.GetExpId())
	}
	if _, err := env.Jobs.AbortJob(ctx, &falconv1.AbortJobRequest{Id: j.GetId()}); err != nil {
		t.Fatal(err)
	}
	if c := recv(s); c.GetKind() != "job" || c.GetId() != j.GetId() || c.GetExpId() != j.GetExpId() {
		t.Fatalf("job change %v, want job %s of %s", c, j.GetId(), j.GetExpId())
	}

	for _, req := range []*falconv1.WatchChangesRequest{
		{Epoch: "another-server", Since: 2},
		{Epoch: hello.GetEpoch(), Since: 1 << 40}, // a seq this server never gave
	} {
		s := open(req)
		recv(s) // hello
		if c := recv(s); c.GetKind() != "resync" {
			t.Errorf("watch from %v: got %v, want resync", req, c)
		}
	}
}

var cpuRole = map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}}
