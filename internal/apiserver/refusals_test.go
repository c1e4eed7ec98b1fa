package apiserver_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// manualClock is the server's clock, moved by the test.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// unauthenticatedRows waits for the refusal log's asynchronous write of
// n entries and returns them, oldest first.
func unauthenticatedRows(t *testing.T, st store.Store, n int) []*store.AuditEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _, err := st.ListAudit(context.Background(), store.AuditFilter{Method: store.AuditUnauthenticated})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n || time.Now().After(deadline) {
			sort.Slice(got, func(i, j int) bool { return got[i].Seq < got[j].Seq })
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Calls refused before authentication are audited in aggregate: one entry
// per source and reason per minute with the number of calls, written once
// the minute ends and, for the minute in progress, when the server stops.
func TestRefusedCallsAreAuditedPerMinute(t *testing.T) {
	iss := authtest.NewIssuer(t)
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
	if err != nil {
		t.Fatal(err)
	}
	st := dbtest.NewSQLite(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)
	clk := &manualClock{t: t0}
	srv := apiserver.New(st, apiserver.WithAuthenticator(cf), apiserver.WithAdmins(auth.NewAdmins(admin)), apiserver.WithClock(clk.Now),
		apiserver.WithArtifactRoot(blobstore.Location{Scheme: "file", Prefix: strings.TrimPrefix(t.TempDir(), "/") + "/"}))
	ctx, cancel := context.WithCancel(context.Background())
	running, err := srv.Serve(ctx, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = running.Wait() })
	conn, err := grpc.NewClient(running.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exps := falconv1.NewExperimentServiceClient(conn)

	for range 5 {
		if _, err := exps.ListExps(as("garbage"), &falconv1.ListExpsRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("garbage token: %v", err)
		}
	}
	for range 3 {
		if _, err := exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("no token: %v", err)
		}
	}
	// Expired at different times: one reason all the same.
	for _, ago := range []time.Duration{time.Hour, 50 * time.Hour} {
		c := iss.UserClaims("mallory@example.com")
		c["exp"] = iss.Now().Add(-ago).Unix()
		req, _ := http.NewRequest("GET", "http://"+running.HTTPAddr+"/v1/experiments", nil)
		req.Header.Set(auth.AssertionHeader, authtest.Sign(iss.Key(), c))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("expired token over HTTP: %d", resp.StatusCode)
		}
	}
	// An authenticated call is audited as itself, if at all, never counted.
	if _, err := exps.ListExps(as(iss.Token("ada@example.com")), &falconv1.ListExpsRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := unauthenticatedRows(t, st, 0); len(got) != 0 {
		t.Fatalf("written before the minute ended: %+v", got)
	}

	// The next minute's first refusal writes the minute that ended.
	clk.Advance(time.Minute)
	if _, err := exps.ListExps(as("garbage"), &falconv1.ListExpsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatal(err)
	}
	type row struct {
		At             time.Time
		Source, Detail string
		Count          int64
		Actor, Outcome string
	}
	rows := func(es []*store.AuditEntry) []row {
		var out []row
		for _, e := range es {
			out = append(out, row{e.At, e.Source, e.Detail, e.Count, e.ActorID + e.ActorEmail, e.Outcome})
		}
		return out
	}
	minute := t0.Truncate(time.Minute)
	want := []row{
		{minute, "127.0.0.1", "malformed token; methods: ListExps", 5, "", "Unauthenticated"},
		{minute, "127.0.0.1", "no credentials: send a Cloudflare Access token (run `falcon auth login`); methods: CreateExp", 3, "", "Unauthenticated"},
		{minute, "127.0.0.1", "token expired at; methods: ListExps", 2, "", "Unauthenticated"},
	}
	if diff := cmp.Diff(want, rows(unauthenticatedRows(t, st, len(want)))); diff != "" {
		t.Fatalf("entries of the first minute (-want +got):\n%s", diff)
	}

	// Stopping writes the minute in progress.
	srv.FlushAudit(context.Background())
	want = append(want, row{minute.Add(time.Minute), "127.0.0.1", "malformed token; methods: ListExps", 1, "", "Unauthenticated"})
	if diff := cmp.Diff(want, rows(unauthenticatedRows(t, st, len(want)))); diff != "" {
		t.Errorf("entries after the flush (-want +got):\n%s", diff)
	}

	// Admins read them with the rest of the log, by the method's name.
	resp, err := falconv1.NewAuditServiceClient(conn).ListAuditEvents(as(iss.Token(admin)), &falconv1.ListAuditEventsRequest{Method: "Unauthenticated"})
	if err != nil {
		t.Fatal(err)
	}
	var counts []int64
	for _, ev := range resp.GetItems() {
		counts = append(counts, ev.GetCount())
		if ev.GetSource() != "127.0.0.1" || ev.GetMethod() != store.AuditUnauthenticated {
			t.Errorf("event %+v", ev)
		}
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 5}, counts); diff != "" {
		t.Errorf("counts, newest first (-want +got):\n%s", diff)
	}
}
