package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
	"github.com/falconhq/falcon/internal/testenv/syncbuf"
)

const admin = "root@example.com"

// cfEnv is an API server that verifies Cloudflare Access tokens of iss.
type cfEnv struct {
	*apitest.Env
	iss  *authtest.Issuer
	logs *syncbuf.Buffer
	// skew moves the verifier's clock ahead of real time (nanoseconds).
	skew *atomic.Int64
}

// advance moves the verifier's clock d ahead, as time passing would.
func (e *cfEnv) advance(d time.Duration) { e.skew.Add(int64(d)) }

// startCF serves on st, or on a new SQLite database when st is nil, with
// one admin.
func startCF(t *testing.T, st *sqlstore.Store) *cfEnv {
	t.Helper()
	return startCFAdmins(t, st, admin)
}

// startCFAdmins is startCF with the given admin entries (emails, group:<name>).
func startCFAdmins(t *testing.T, st *sqlstore.Store, admins ...string) *cfEnv {
	t.Helper()
	iss := authtest.NewIssuer(t)
	skew := &atomic.Int64{}
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config(),
		auth.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	o := apitest.Options{
		Clusters: map[string]string{"local": "local"},
		Server: []apiserver.Option{
			apiserver.WithAuthenticator(cf), apiserver.WithAdmins(auth.NewAdmins(admins...)),
			apiserver.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		},
	}
	o.Store = st
	return &cfEnv{Env: apitest.StartWith(t, o), iss: iss, logs: logs, skew: skew}
}

// as returns ctx calling as the holder of tok, over gRPC.
func as(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

// get calls the HTTP gateway with extra headers and returns the status and
// the decoded body.
func (e *cfEnv) get(t *testing.T, method, path, body string, header http.Header) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+e.HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

func TestTokensOverGRPCAndHTTP(t *testing.T) {
	e := startCF(t, nil)
	exps := falconv1.NewExperimentServiceClient(e.UserConn)
	refused := authtest.RefusedTokens(t, e.iss)
	for _, tc := range refused {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := exps.ListExps(as(tc.Token), &falconv1.ListExpsRequest{})
			if st := status.Convert(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), tc.Reason) {
				t.Errorf("gRPC: %v; want Unauthenticated mentioning %q", err, tc.Reason)
			}
			code, body := e.get(t, "GET", "/v1/experiments", "", http.Header{auth.AssertionHeader: {tc.Token}})
			if msg, _ := body["message"].(string); code != http.StatusUnauthorized || !strings.Contains(msg, tc.Reason) {
				t.Errorf("HTTP: %d %v; want 401 mentioning %q", code, body, tc.Reason)
			}
		})
	}
	t.Run("no token", func(t *testing.T) {
		_, err := exps.ListExps(context.Background(), &falconv1.ListExpsRequest{})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "falcon auth login") {
			t.Errorf("gRPC: %v", err)
		}
		if code, body := e.get(t, "GET", "/v1/experiments", "", nil); code != http.StatusUnauthorized {
			t.Errorf("HTTP: %d %v", code, body)
		}
	})

	good := e.iss.Token("alice@example.com")
	t.Run("valid", func(t *testing.T) {
		for name, ctx := range map[string]context.Context{
			"bearer":    as(good),
			"assertion": metadata.AppendToOutgoingContext(context.Background(), "cf-access-jwt-assertion", good),
		} {
			if _, err := exps.ListExps(ctx, &falconv1.ListExpsRequest{}); err != nil {
				t.Errorf("gRPC with %s: %v", name, err)
			}
		}
		for name, h := range map[string]http.Header{
			"assertion header": {auth.AssertionHeader: {good}},
			"cookie":           {"Cookie": {"other=1; " + auth.AuthCookie + "=" + good}},
			"bearer":           {"Authorization": {"Bearer " + good}},
		} {
			code, body := e.get(t, "GET", "/v1/users/me", "", h)
			if code != http.StatusOK || body["email"] != "alice@example.com" || body["user_id"] != "sub-alice@example.com" {
				t.Errorf("HTTP with %s: %d %v", name, code, body)
			}
		}
	})

	logs := e.logs.String()
	for _, tc := range append(refused, authtest.Refused{Name: "valid", Token: good}) {
		if len(tc.Token) > 20 && strings.Contains(logs, tc.Token) {
			t.Errorf("the server logged the %s token", tc.Name)
		}
	}
	if !strings.Contains(logs, "request refused") || !strings.Contains(logs, "token expired") {
		t.Errorf("refusals are not logged with their reason:\n%s", logs)
	}
}

func TestServiceTokenIsAPrincipal(t *testing.T) {
	e := startCF(t, nil)
	tok := authtest.Sign(e.iss.Key(), e.iss.ServiceClaims("ci-bot.access"))
	exp, err := falconv1.NewExperimentServiceClient(e.UserConn).CreateExp(as(tok), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "from-ci", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if exp.GetCreator() != "ci-bot.access" || exp.GetCreatorId() != "service:ci-bot.access" {
		t.Errorf("creator %q (%q), want the service token's common_name", exp.GetCreator(), exp.GetCreatorId())
	}
	users, err := e.Store.ListUsers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"service:ci-bot.access", ""}, []string{users[0].UserID, users[0].Email}); len(users) != 1 || diff != "" {
		t.Errorf("users %+v", users)
	}
}

func TestKeyRotationThroughTheServer(t *testing.T) {
	e := startCF(t, nil)
	h := func(tok string) http.Header { return http.Header{auth.AssertionHeader: {tok}} }
	if code, body := e.get(t, "GET", "/v1/users/me", "", h(e.iss.Token("a@example.com"))); code != 200 {
		t.Fatalf("before rotation: %d %v", code, body)
	}
	e.advance(auth.DefaultKeyRefreshInterval) // a rotation comes long after the last fetch
	next := authtest.NewKey(t, "key-2")
	e.iss.Serve(e.iss.Key(), next)
	if code, body := e.get(t, "GET", "/v1/users/me", "", h(authtest.Sign(next, e.iss.UserClaims("a@example.com")))); code != 200 {
		t.Fatalf("new kid after rotation, no restart: %d %v", code, body)
	}
}

func TestConcurrentFirstRequestsCreateOneUser(t *testing.T) {
	for _, db := range []struct {
		name string
		open func(testing.TB, ...sqlstore.Option) *sqlstore.Store
	}{{"SQLite", dbtest.NewSQLite}, {"MariaDB", dbtest.NewMySQL}} {
		t.Run(db.name, func(t *testing.T) {
			e := startCF(t, db.open(t))
			tok := e.iss.Token("new@example.com")
			const n = 24
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					if i%2 == 0 {
						_, errs[i] = falconv1.NewUserServiceClient(e.UserConn).GetCurrentUser(as(tok), &falconv1.GetCurrentUserRequest{})
						return
					}
					if code, body := e.get(t, "GET", "/v1/experiments", "", http.Header{"Authorization": {"Bearer " + tok}}); code != 200 {
						errs[i] = fmt.Errorf("HTTP %d %v", code, body)
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			users, err := e.Store.ListUsers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(users) != 1 || users[0].UserID != "sub-new@example.com" || users[0].Email != "new@example.com" {
				t.Errorf("users after %d concurrent first requests: %+v", n, users)
			}
		})
	}
}

func TestOwnership(t *testing.T) {
	e := startCF(t, nil)
	alice, bob, root := e.iss.Token("alice@example.com"), e.iss.Token("bob@example.com"), e.iss.Token(admin)
	exps := falconv1.NewExperimentServiceClient(e.UserConn)
	exp, err := exps.CreateExp(as(alice), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "alices", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := exp.GetId()
	if exp.GetCreator() != "alice@example.com" || exp.GetCreatorId() != "sub-alice@example.com" {
		t.Fatalf("creator %q / %q", exp.GetCreator(), exp.GetCreatorId())
	}

	// Anyone authenticated may read.
	if _, err := exps.GetExp(as(bob), &falconv1.GetExpRequest{Id: id}); err != nil {
		t.Fatalf("bob reading alice's experiment: %v", err)
	}
	// Bob may not abort it, over gRPC or HTTP; the refusal names the owner.
	_, err = exps.AbortExp(as(bob), &falconv1.AbortExpRequest{Id: id})
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "alice@example.com") {
		t.Fatalf("bob aborting: %v; want PermissionDenied naming alice", err)
	}
	if code, body := e.get(t, "POST", "/v1/experiments/"+id+":abort", "{}", http.Header{auth.AssertionHeader: {bob}}); code != http.StatusForbidden {
		t.Fatalf("bob aborting over HTTP: %d %v", code, body)
	}
	if got, err := exps.GetExp(as(alice), &falconv1.GetExpRequest{Id: id}); err != nil || got.GetStatus() != "Created" {
		t.Fatalf("after bob's refused abort the experiment is %s (%v)", got.GetStatus(), err)
	}
	// An admin may.
	if _, err := exps.AbortExp(as(root), &falconv1.AbortExpRequest{Id: id, Reason: "cleanup"}); err != nil {
		t.Fatalf("admin aborting: %v", err)
	}
	// The controllers finish the abort.
	if _, err := falconv1.NewExperimentServiceClient(e.Conn).UpdateExpStatus(context.Background(), &falconv1.UpdateExpStatusRequest{
		Id: id, ExpectedStatus: "Aborting", Status: "Aborted"}); err != nil {
		t.Fatal(err)
	}
	_, err = exps.DeleteExp(as(bob), &falconv1.DeleteExpRequest{Id: id})
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "alice@example.com") {
		t.Fatalf("bob deleting: %v; want PermissionDenied naming alice", err)
	}
	if _, err := exps.DeleteExp(as(alice), &falconv1.DeleteExpRequest{Id: id}); err != nil {
		t.Fatalf("alice deleting her own: %v", err)
	}

	entries, _, err := e.Store.ListAudit(context.Background(), store.AuditFilter{TargetID: id})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Actor, Method, Outcome, Detail string }
	var got []row
	for i := len(entries) - 1; i >= 0; i-- { // oldest first reads as a story
		en := entries[i]
		method := en.Method[strings.LastIndex(en.Method, "/")+1:]
		got = append(got, row{en.ActorEmail, method, en.Outcome, en.Detail})
	}
	want := []row{
		{"alice@example.com", "CreateExp", "ok", "name=alices"},
		{"bob@example.com", "AbortExp", "PermissionDenied", "experiment " + id + " belongs to alice@example.com; only its creator or an admin may abort it"},
		{"bob@example.com", "AbortExp", "PermissionDenied", "experiment " + id + " belongs to alice@example.com; only its creator or an admin may abort it"},
		{admin, "AbortExp", "ok", "as admin; owner alice@example.com; changed=true"},
		{"bob@example.com", "DeleteExp", "PermissionDenied", "experiment " + id + " belongs to alice@example.com; only its creator or an admin may delete it"},
		{"alice@example.com", "DeleteExp", "ok", ""},
	}
	for i := range got {
		got[i].Detail = strings.TrimPrefix(got[i].Detail, "permission denied: ")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit log of %s (-want +got):\n%s", id, diff)
	}
	for _, en := range entries {
		if en.At.IsZero() || en.ActorID == "" {
			t.Errorf("audit entry without time or actor: %+v", en)
		}
	}
}

// An admin may be named by an identity-provider group, which Access puts
// in the token as "groups", or under "custom" when the application maps
// them so: a member aborts someone else's experiment, a non-member is
// refused, and the log says the admin acted as one.
func TestAdminByGroup(t *testing.T) {
	e := startCFAdmins(t, nil, "group:Falcon-Admins")
	withGroups := func(email string, custom bool, groups ...string) string {
		c := e.iss.UserClaims(email)
		if custom {
			c["custom"] = map[string]any{"groups": groups}
		} else {
			c["groups"] = groups
		}
		return authtest.Sign(e.iss.Key(), c)
	}
	alice := e.iss.Token("alice@example.com")
	exps := falconv1.NewExperimentServiceClient(e.UserConn)
	newExp := func(t *testing.T, name string) string {
		x, err := exps.CreateExp(as(alice), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: name, RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return x.GetId()
	}
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"member by the groups claim", withGroups("carol@example.com", false, "eng", "falcon-admins"), true},
		{"member by custom.groups", withGroups("dave@example.com", true, "FALCON-ADMINS"), true},
		{"in other groups only", withGroups("erin@example.com", false, "eng", "falcon-admins-2"), false},
		{"no groups in the token", e.iss.Token("frank@example.com"), false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := newExp(t, fmt.Sprintf("alices-%d", i))
			_, err := exps.AbortExp(as(tt.token), &falconv1.AbortExpRequest{Id: id})
			if tt.ok && err != nil {
				t.Fatalf("aborting alice's experiment: %v", err)
			}
			if !tt.ok {
				if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "alice@example.com") {
					t.Fatalf("aborting alice's experiment: %v; want PermissionDenied naming alice", err)
				}
				return
			}
			entries, _, err := e.Store.ListAudit(context.Background(), store.AuditFilter{TargetID: id, Method: falconv1.ExperimentService_AbortExp_FullMethodName})
			if err != nil || len(entries) != 1 || entries[0].Outcome != store.AuditOK || entries[0].Detail != "as admin; owner alice@example.com; changed=true" {
				t.Errorf("audit of the group admin's abort: %+v, %v", entries, err)
			}
		})
	}
}

func TestInternalMethodsAreTheControllers(t *testing.T) {
	e := startCF(t, nil)
	alice, root := e.iss.Token("alice@example.com"), e.iss.Token(admin)
	exp := func() *falconv1.Experiment {
		x, err := falconv1.NewExperimentServiceClient(e.UserConn).CreateExp(as(alice), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: "x", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}()
	jobID, artID := exp.GetJobs()[0].GetId(), exp.GetArtifact().GetId()
	calls := map[string]func(ctx context.Context, conn *grpc.ClientConn) error{
		"UpdateJobStatus": func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := falconv1.NewJobServiceClient(c).UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: jobID, ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting"})
			return err
		},
		"UpdateExpStatus": func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := falconv1.NewExperimentServiceClient(c).UpdateExpStatus(ctx, &falconv1.UpdateExpStatusRequest{Id: exp.GetId(), ExpectedStatus: "Created", Status: "Created"})
			return err
		},
		"UpdateArtifactStatus": func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := falconv1.NewArtifactServiceClient(c).UpdateArtifactStatus(ctx, &falconv1.UpdateArtifactStatusRequest{Id: artID, ExpectedStatus: "Created", Status: "Created"})
			return err
		},
		"AbortJob": func(ctx context.Context, c *grpc.ClientConn) error {
			_, err := falconv1.NewJobServiceClient(c).AbortJob(ctx, &falconv1.AbortJobRequest{Id: "job-0000000000"})
			return err
		},
		"WatchChanges": func(ctx context.Context, c *grpc.ClientConn) error {
			s, err := falconv1.NewJobServiceClient(c).WatchChanges(ctx, &falconv1.WatchChangesRequest{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
	}
	wrong := e.Dial(t, grpc.WithPerRPCCredentials(auth.ControllerCredentials(auth.GenerateControllerSecret())))
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for who, ctx := range map[string]context.Context{"a user": as(alice), "an admin": as(root)} {
				if err := call(ctx, e.UserConn); status.Code(err) != codes.PermissionDenied {
					t.Errorf("%s calling %s: %v; want PermissionDenied", who, name, err)
				}
			}
			if err := call(context.Background(), wrong); status.Code(err) != codes.Unauthenticated {
				t.Errorf("a wrong controller token calling %s: %v; want Unauthenticated", name, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := call(ctx, e.Conn); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
				t.Errorf("the controller calling %s: %v", name, err)
			}
		})
	}

	// The controller may read and register its cluster, and nothing a
	// user does.
	ctl := falconv1.NewClusterServiceClient(e.Conn)
	if _, err := ctl.RegisterCluster(context.Background(), &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{Name: "box", Backend: "local"}}); err != nil {
		t.Errorf("controller registering its cluster: %v", err)
	}
	if _, err := falconv1.NewExperimentServiceClient(e.Conn).AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("controller aborting an experiment: %v; want PermissionDenied", err)
	}
	if _, err := falconv1.NewUserServiceClient(e.Conn).GetCurrentUser(context.Background(), &falconv1.GetCurrentUserRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("controller asking who it is: %v; want PermissionDenied", err)
	}
	users, _ := e.Store.ListUsers(context.Background())
	for _, u := range users {
		if u.UserID == auth.Controller.UserID {
			t.Error("the controller was registered as a user")
		}
	}
}

// The controller secret is a gRPC credential only. However an HTTP client
// dresses it as a header, including the Grpc-Metadata- prefix older
// grpc-gateway releases turned into metadata, the gateway does not forward
// it: the call is judged by its Access token alone (a wrong secret is not
// even noticed), and the internal methods stay out of reach.
func TestControllerTokenNeverCrossesTheGateway(t *testing.T) {
	e := startCF(t, nil)
	alice := e.iss.Token("alice@example.com")
	exp := func() *falconv1.Experiment {
		x, err := falconv1.NewExperimentServiceClient(e.UserConn).CreateExp(as(alice), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: "x", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}()
	job := exp.GetJobs()[0]
	headers := []string{
		"X-Falcon-Controller-Token",
		"x-falcon-controller-token",
		"Grpc-Metadata-X-Falcon-Controller-Token",
		"grpc-metadata-x-falcon-controller-token",
		"Grpcgateway-X-Falcon-Controller-Token",
		"Grpc-Metadata-Grpcgateway-X-Falcon-Controller-Token",
		"Grpc-Metadata-X-Falcon-Controller-Token-Bin",
	}
	for _, name := range headers {
		for _, secret := range []struct{ kind, value string }{
			{"the real secret", e.ControllerSecret},
			{"a wrong secret", auth.GenerateControllerSecret()},
		} {
			t.Run(name+" with "+secret.kind, func(t *testing.T) {
				ctl := http.Header{name: {secret.value}}
				// Alone it authenticates nothing: not a controller (which a
				// read would admit, and /users/me refuse with 403), not a
				// refused controller ("invalid controller token").
				for _, path := range []string{"/v1/users/me", "/v1/experiments", "/v1/jobs/" + job.GetId()} {
					code, body := e.get(t, "GET", path, "", ctl)
					if msg, _ := body["message"].(string); code != http.StatusUnauthorized || !strings.Contains(msg, "no credentials") {
						t.Errorf("GET %s: %d %v; want 401 no credentials", path, code, body)
					}
				}
				// Beside a user's token the call is the user's.
				withUser := ctl.Clone()
				withUser.Set(auth.AssertionHeader, alice)
				if code, body := e.get(t, "GET", "/v1/users/me", "", withUser); code != http.StatusOK || body["email"] != "alice@example.com" {
					t.Errorf("GET /v1/users/me beside alice's token: %d %v", code, body)
				}
				// A controller may register its local cluster; alice may not.
				code, body := e.get(t, "POST", "/v1/clusters", `{"name": "box", "backend": "local"}`, withUser)
				if msg, _ := body["message"].(string); code != http.StatusForbidden || !strings.Contains(msg, "alice@example.com is not an admin") {
					t.Errorf("POST /v1/clusters beside alice's token: %d %v; want 403 for alice", code, body)
				}
				// The internal methods have no route, by any path.
				for _, path := range []string{
					"/falcon.v1.JobService/UpdateJobStatus", "/falcon.v1.JobService/AbortJob",
					"/v1/falcon.v1.JobService/UpdateJobStatus", "/v1/jobs/" + job.GetId(), "/v1/jobs/" + job.GetId() + ":abort",
				} {
					body := `{"id": "` + job.GetId() + `", "expected_status": "Pending", "status": "Running"}`
					if code, resp := e.get(t, "POST", path, body, withUser); code < 400 || code == http.StatusForbidden || code == http.StatusUnauthorized {
						t.Errorf("POST %s: %d %v; want no route", path, code, resp)
					}
				}
			})
		}
	}
	if got, err := falconv1.NewJobServiceClient(e.Conn).GetJob(context.Background(), &falconv1.GetJobRequest{Id: job.GetId()}); err != nil ||
		got.GetStatus() != "Pending" || got.GetVersion() != job.GetVersion() {
		t.Errorf("the job after HTTP calls carrying the secret: %v, %v; want it untouched", got, err)
	}
	if clusters := listClusters(t, falconv1.NewClusterServiceClient(e.Conn)); len(clusters) != 1 {
		t.Errorf("clusters %v; want only local", clusterNames(clusters))
	}
	if logs := e.logs.String(); strings.Contains(logs, "invalid controller token") || strings.Contains(logs, e.ControllerSecret) {
		t.Errorf("the gateway forwarded the secret header:\n%s", logs)
	}
}

func TestLoginEndpoint(t *testing.T) {
	e := startCF(t, nil)
	const state = "0123456789abcdefXYZ_-"
	login := func(method, callback, state, code string, h http.Header) *http.Response {
		t.Helper()
		q, form := url.Values{"callback": {callback}, "state": {state}, "code": {code}}, url.Values(nil)
		if method == http.MethodPost {
			q, form = url.Values{}, q
		}
		resp, _ := doLogin(t, e.HTTPAddr, method, q, form, h)
		return resp
	}
	good := e.iss.Token("alice@example.com")
	withTok := http.Header{auth.AssertionHeader: {good}}

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, cb := range []string{"http://evil.example.com:80/cb", "https://127.0.0.1:9/cb", "http://127.0.0.1/cb", "http://user@127.0.0.1:9/cb", "javascript:alert(1)", ""} {
			if resp := login(method, cb, state, loginCode, withTok); resp.StatusCode != http.StatusBadRequest || redirected(resp) != nil {
				t.Errorf("%s callback %q: %d, want 400", method, cb, resp.StatusCode)
			}
		}
		for _, st := range []string{"", "short", strings.Repeat("x", 200), "0123456789abcdef<script>"} {
			if resp := login(method, "http://127.0.0.1:9/cb", st, loginCode, withTok); resp.StatusCode != http.StatusBadRequest || redirected(resp) != nil {
				t.Errorf("%s state %q: %d, want 400", method, st, resp.StatusCode)
			}
		}
	}

	// A valid login gets the confirmation page, never the token.
	resp := login(http.MethodGet, "http://127.0.0.1:9/callback", state, loginCode, withTok)
	if resp.StatusCode != http.StatusOK || redirected(resp) != nil {
		t.Fatalf("login with a valid token: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A cookie (what a browser behind Access carries) works too.
	resp = login(http.MethodGet, "http://localhost:9/callback", state, loginCode, http.Header{"Cookie": {auth.AuthCookie + "=" + good}})
	if resp.StatusCode != http.StatusOK || redirected(resp) != nil {
		t.Errorf("login with the cookie: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Past the callback and state checks, a refusal goes back to the
	// callback, so the CLI ends with the reason.
	expired := authtest.RefusedTokens(t, e.iss)[0]
	for _, tc := range []struct {
		name, code string
		h          http.Header
		wantErr    string
	}{
		{name: "expired token", code: loginCode, h: http.Header{auth.AssertionHeader: {expired.Token}}, wantErr: "expired"},
		{name: "no code (an older CLI)", code: "", h: withTok, wantErr: "no confirmation code: update the falcon CLI"},
		{name: "lower-case code", code: "k7qm-4xwd", h: withTok, wantErr: "code must be"},
		{name: "code without its dash", code: "K7QM4XWD", h: withTok, wantErr: "code must be"},
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			resp := login(method, "http://127.0.0.1:9/callback", state, tc.code, tc.h)
			loc := redirected(resp)
			if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Host != "127.0.0.1:9" || loc.Query().Get("token") != "" ||
				!strings.Contains(loc.Query().Get("error"), tc.wantErr) || loc.Query().Get("state") != state {
				t.Errorf("%s, %s: %d Location %q", tc.name, method, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
	}
}

func TestLoginEndpointWithoutTokens(t *testing.T) {
	env := apitest.Start(t, nil) // the local authenticator, as in falcon dev
	resp, _ := doLogin(t, env.HTTPAddr, http.MethodGet, url.Values{"callback": {"http://127.0.0.1:9/callback"}, "state": {"0123456789abcdef0123"}, "code": {loginCode}}, nil, nil)
	loc := redirected(resp)
	if loc == nil || !strings.Contains(loc.Query().Get("error"), "no login is needed") {
		t.Errorf("Location %q", resp.Header.Get("Location"))
	}
}

// failingAudit is a store whose audit log cannot be written.
type failingAudit struct{ store.Store }

func (failingAudit) AppendAudit(context.Context, store.AuditEntry) error {
	return errors.New("disk full")
}

func TestAuditFailureDoesNotFailTheCall(t *testing.T) {
	st := dbtest.NewSQLite(t)
	logs := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	running, err := apiserver.New(failingAudit{st}, apiserver.WithArtifactRoot(blobstore.Location{Scheme: "file", Prefix: strings.TrimPrefix(t.TempDir(), "/") + "/"}),
		apiserver.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))).Serve(ctx, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = running.Wait() })
	body := `{"experiment": {"name": "kept", "role_to_task_spec": {"main": {"command": "x", "replica": 1}}}}`
	resp, err := http.Post("http://"+running.HTTPAddr+"/v1/experiments", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create with a broken audit log: %d", resp.StatusCode)
	}
	if out := logs.String(); !strings.Contains(out, "audit write failed") || !strings.Contains(out, "disk full") ||
		!strings.Contains(out, "CreateExp") || !strings.Contains(out, "name=kept") {
		t.Errorf("the lost audit entry is not logged in full:\n%s", out)
	}
}

// TestListMine: `exp list --creator me` is the caller's own experiments,
// found by user ID, over gRPC and HTTP; another user's "me" is theirs.
func TestListMine(t *testing.T) {
	e := startCF(t, nil)
	alice, bob := e.iss.Token("alice@example.com"), e.iss.Token("bob@example.com")
	exps := falconv1.NewExperimentServiceClient(e.UserConn)
	for _, c := range []struct{ tok, name string }{{alice, "a1"}, {bob, "b1"}, {alice, "a2"}} {
		if _, err := exps.CreateExp(as(c.tok), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: c.name, RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(items []*falconv1.Experiment) (out []string) {
		for _, x := range items {
			out = append(out, x.GetName())
		}
		return out
	}
	for tok, want := range map[string][]string{alice: {"a2", "a1"}, bob: {"b1"}} {
		got, err := exps.ListExps(as(tok), &falconv1.ListExpsRequest{Creator: "me"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names(got.GetItems()), want) {
			t.Errorf("gRPC: mine = %v, want %v", names(got.GetItems()), want)
		}
	}
	code, body := e.get(t, "GET", "/v1/experiments?creator=me", "", http.Header{"Cf-Access-Jwt-Assertion": {bob}})
	if items, _ := body["items"].([]any); code != 200 || len(items) != 1 || items[0].(map[string]any)["name"] != "b1" {
		t.Errorf("HTTP: %d %v, want bob's b1 alone", code, body)
	}
	// A creator named outright is still matched by the name shown.
	got, err := exps.ListExps(as(bob), &falconv1.ListExpsRequest{Creator: "alice@example.com"})
	if err != nil || !slices.Equal(names(got.GetItems()), []string{"a2", "a1"}) {
		t.Errorf("by name: %v, %v", names(got.GetItems()), err)
	}
}
