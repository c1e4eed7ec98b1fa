package apiserver_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// stepClock is a clock the test moves.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// TestTTL runs experiments' time-to-live through the API server and the
// expController under one injected clock: the cap at create, interactive
// slices without a command, who may extend, the warning given once, the
// expiry that stops the experiment with a Message saying why, an extend
// that moves it, idle_ttl, and extend refused once the experiment ends.
func TestTTL(t *testing.T) {
	for _, db := range stores {
		t.Run(db.name, func(t *testing.T) {
			clock := &stepClock{t: time.Now().UTC()}
			iss := authtest.NewIssuer(t)
			cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
			if err != nil {
				t.Fatal(err)
			}
			e := apitest.StartWith(t, apitest.Options{
				Clusters: map[string]string{"local": "local"},
				// The store's clock too: it stamps started_at, from which
				// an expiry is counted.
				Store: db.open(t, sqlstore.WithClock(clock.now)),
				Server: []apiserver.Option{apiserver.WithAuthenticator(cf), apiserver.WithAdmins(auth.NewAdmins(admin)),
					apiserver.WithClock(clock.now), apiserver.WithMaxTTL(24 * time.Hour)},
			})
			ctx := context.Background()
			alice, bob := as(iss.Token("alice@example.com")), as(iss.Token("bob@example.com"))
			exps := falconv1.NewExperimentServiceClient(e.UserConn)
			ctl := expctl.New(e.Conn, expctl.WithClock(clock.now))
			reconcile := func() {
				t.Helper()
				if err := ctl.Reconcile(ctx); err != nil {
					t.Fatal(err)
				}
			}
			get := func(id string) *falconv1.Experiment {
				t.Helper()
				x, err := exps.GetExp(alice, &falconv1.GetExpRequest{Id: id})
				if err != nil {
					t.Fatal(err)
				}
				return x
			}
			create := func(x *falconv1.Experiment) *falconv1.Experiment {
				t.Helper()
				got, err := exps.CreateExp(alice, &falconv1.CreateExpRequest{Experiment: x})
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			// run moves every job of x to Running, as the resource manager
			// would, and lets the expController follow.
			run := func(x *falconv1.Experiment) *falconv1.Experiment {
				t.Helper()
				for _, j := range x.GetJobs() {
					if _, err := e.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: "Pending", Status: "Running"}); err != nil {
						t.Fatal(err)
					}
				}
				reconcile()
				got := get(x.GetId())
				if got.GetStatus() != "Running" {
					t.Fatalf("experiment %s is %s, want Running", x.GetId(), got.GetStatus())
				}
				return got
			}

			// The server's cap, named with the field.
			_, err = exps.CreateExp(alice, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
				Name: "too-long", Ttl: durationpb.New(25 * time.Hour),
				RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "ttl: 25h is over this server's limit of 24h") {
				t.Fatalf("ttl over --max-ttl: %v", err)
			}

			// An interactive slice needs no command: its ranks hold.
			slice := create(&falconv1.Experiment{Name: "slice", Interactive: true, Ttl: durationpb.New(2 * time.Hour),
				RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Replica: 2}}})
			if cmd := slice.GetJobs()[0].GetTaskSpec().GetCommand(); cmd != apiserver.HoldCommand {
				t.Fatalf("interactive job command %q, want the hold command", cmd)
			}
			if slice.ExpiresAt != nil || slice.GetTtl().AsDuration() != 2*time.Hour {
				t.Fatalf("before it runs: expires_at %v, ttl %v; want none and 2h", slice.GetExpiresAt(), slice.GetTtl())
			}
			slice = run(slice)
			started := slice.GetStartedAt().AsTime()
			if got := slice.GetExpiresAt().AsTime(); !got.Equal(started.Add(2 * time.Hour)) {
				t.Fatalf("expires_at %v, want started_at %v + 2h", got, started)
			}

			// Nothing happens before the warning window; inside it the
			// warning is given once.
			clock.set(started.Add(time.Hour))
			reconcile()
			enforce := func(id string) string {
				t.Helper()
				resp, err := falconv1.NewExperimentServiceClient(e.Conn).EnforceTTL(ctx, &falconv1.EnforceTTLRequest{Id: id})
				if err != nil {
					t.Fatal(err)
				}
				return resp.GetAction()
			}
			if a := enforce(slice.GetId()); a != "" {
				t.Fatalf("an hour before expiry: action %q, want none", a)
			}
			clock.set(started.Add(2*time.Hour - lifecycle.TTLWarning + time.Minute))
			reconcile() // warns
			if a := enforce(slice.GetId()); a != "" {
				t.Fatalf("after the controller warned: action %q, want none (warned once)", a)
			}
			if got := get(slice.GetId()); got.GetStatus() != "Running" {
				t.Fatalf("warned experiment is %s, want still Running", got.GetStatus())
			}

			// Only its owner or an admin may extend it.
			_, err = exps.ExtendExp(bob, &falconv1.ExtendExpRequest{Id: slice.GetId(), Ttl: durationpb.New(time.Hour)})
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("bob extending alice's experiment: %v", err)
			}
			_, err = exps.ExtendExp(alice, &falconv1.ExtendExpRequest{Id: slice.GetId(), Ttl: durationpb.New(48 * time.Hour)})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "ttl: 48h is over this server's limit of 24h") {
				t.Fatalf("extend over --max-ttl: %v", err)
			}
			extended, err := exps.ExtendExp(alice, &falconv1.ExtendExpRequest{Id: slice.GetId(), Ttl: durationpb.New(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if want := clock.now().Add(time.Hour); !extended.GetExpiresAt().AsTime().Equal(want.Truncate(time.Microsecond)) {
				t.Fatalf("extended to %v, want %v", extended.GetExpiresAt().AsTime(), want)
			}
			rows, _, err := e.Store.ListAudit(ctx, store.AuditFilter{TargetID: slice.GetId(), Method: falconv1.ExperimentService_ExtendExp_FullMethodName})
			if err != nil || len(rows) != 3 {
				t.Fatalf("audit rows of ExtendExp: %d, %v; want bob's refusal, the refused 48h and alice's extend", len(rows), err)
			}
			// The new expiry gets its own warning.
			clock.set(extended.GetExpiresAt().AsTime().Add(-5 * time.Minute))
			if a := enforce(slice.GetId()); a != "warned" {
				t.Fatalf("inside the extended expiry's window: action %q, want warned", a)
			}

			// Watchers see the warnings and the extend among its events.
			events, err := e.Store.ListEvents(ctx, store.EventFilter{ExpID: slice.GetId()})
			if err != nil {
				t.Fatal(err)
			}
			var said []string
			for _, ev := range events {
				if strings.HasPrefix(ev.Message, "ttl ") {
					said = append(said, ev.Message)
				}
			}
			if len(said) != 3 || !strings.HasPrefix(said[0], "ttl ends in 9m;") || said[1] != "ttl extended by alice@example.com" || !strings.HasPrefix(said[2], "ttl ends in 5m;") {
				t.Fatalf("ttl events %q; want the first warning, the extend, the second warning", said)
			}

			// At expiry the experiment is stopped like an abort.
			clock.set(extended.GetExpiresAt().AsTime())
			reconcile()
			got := get(slice.GetId())
			if got.GetStatus() != "Aborting" || !strings.HasPrefix(got.GetMessage(), "ttl expired at ") {
				t.Fatalf("at expiry: %s %q; want Aborting, ttl expired", got.GetStatus(), got.GetMessage())
			}
			for _, j := range got.GetJobs() {
				if _, err := e.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: "Aborting", Status: "Aborted", Message: j.GetMessage()}); err != nil {
					t.Fatal(err)
				}
			}
			reconcile()
			if got := get(slice.GetId()); got.GetStatus() != "Aborted" || !strings.HasPrefix(got.GetMessage(), "ttl expired at ") {
				t.Fatalf("after the stop: %s %q; want Aborted, ttl expired", got.GetStatus(), got.GetMessage())
			}
			_, err = exps.ExtendExp(alice, &falconv1.ExtendExpRequest{Id: slice.GetId(), Ttl: durationpb.New(time.Hour)})
			if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "is Aborted") {
				t.Fatalf("extending an ended experiment: %v", err)
			}

			// A ttl never extended says so in the Message.
			plain := run(create(&falconv1.Experiment{Name: "plain", Ttl: durationpb.New(30 * time.Minute),
				RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "train", Replica: 1}}}))
			clock.set(plain.GetStartedAt().AsTime().Add(30 * time.Minute))
			reconcile()
			if got := get(plain.GetId()); got.GetStatus() != "Aborting" || got.GetMessage() != "ttl of 30m expired" {
				t.Fatalf("plain ttl at expiry: %s %q", got.GetStatus(), got.GetMessage())
			}

			// idle_ttl: nothing happens while the experiment was active
			// recently; once idle that long it is stopped.
			idle := run(create(&falconv1.Experiment{Name: "idle", IdleTtl: durationpb.New(10 * time.Minute),
				RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "train", Replica: 1}}}))
			start := idle.GetStartedAt().AsTime()
			if err := e.Store.TouchExpActivity(ctx, idle.GetId(), start.Add(8*time.Minute)); err != nil {
				t.Fatal(err)
			}
			clock.set(start.Add(12 * time.Minute))
			reconcile()
			if got := get(idle.GetId()); got.GetStatus() != "Running" {
				t.Fatalf("4 minutes after activity: %s %q; want Running", got.GetStatus(), got.GetMessage())
			}
			clock.set(start.Add(18 * time.Minute))
			reconcile()
			if got := get(idle.GetId()); got.GetStatus() != "Aborting" || !strings.HasPrefix(got.GetMessage(), "idle_ttl of 10m expired") {
				t.Fatalf("10 minutes after activity: %s %q; want Aborting, idle_ttl expired", got.GetStatus(), got.GetMessage())
			}
		})
	}
}
