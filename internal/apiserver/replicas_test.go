package apiserver_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// Two server replicas on one database: a watcher of one learns of a change
// written through the other within a poll, not at its next full read.
func TestChangesThroughAnotherReplica(t *testing.T) {
	a := apitest.Start(t, map[string]string{"local": "local"}, apiserver.WithReplicaPoll(50*time.Millisecond))
	st, err := sqlstore.Open(context.Background(), "sqlite", sqlstore.SQLiteDSN(filepath.Join(a.Dir, "falcon.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := apitest.StartWith(t, apitest.Options{Store: st})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream := watchAfterHello(t, ctx, a)
	exp := b.Create(t, "through-b", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	start := time.Now()
	abort, err := b.Exps.AbortExp(ctx, &falconv1.AbortExpRequest{Id: exp.GetId(), Reason: "changed my mind"})
	if err != nil || !abort.GetChanged() {
		t.Fatalf("abort through b: %v %v", abort, err)
	}
	for {
		c, err := stream.Recv()
		if err != nil {
			t.Fatalf("no change naming %s reached a's watcher: %v", exp.GetId(), err)
		}
		if c.GetExpId() != exp.GetId() {
			continue
		}
		// The creation's change may come first; the abort's is what a
		// controller must see: read the experiment as a's watcher would.
		got, err := falconv1.NewExperimentServiceClient(a.UserConn).GetExp(ctx, &falconv1.GetExpRequest{Id: exp.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetStatus() == "Aborted" || got.GetStatus() == "Aborting" {
			t.Logf("an abort through b reached a's watcher %s later", time.Since(start).Round(time.Millisecond))
			return
		}
	}
}
