package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// withSub is a token of email whose identity has the Cloudflare subject
// sub: what a person removed from Access and added again presents.
func (e *cfEnv) withSub(email, sub string) string {
	c := e.iss.UserClaims(email)
	c["sub"] = sub
	return authtest.Sign(e.iss.Key(), c)
}

// owners is every user and who owns each experiment, what a relink may
// change.
func owners(t *testing.T, st store.Store) (users []string, exps map[string]string) {
	t.Helper()
	us, err := st.ListUsers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		users = append(users, u.UserID+" "+u.Email)
	}
	xs, _, err := st.ListExps(context.Background(), store.ExpFilter{})
	if err != nil {
		t.Fatal(err)
	}
	exps = map[string]string{}
	for _, x := range xs {
		exps[x.Name] = x.CreatorID
	}
	return users, exps
}

// A person whose Cloudflare identity was recreated is refused with the
// command that fixes it; an admin runs it, and their next call is
// admitted as the user they were, owning their experiments. A user who is
// not an admin may not relink, and a relink to a sub another user has
// changes nothing.
func TestRelinkUser(t *testing.T) {
	for _, db := range []struct {
		name string
		open func(testing.TB, ...sqlstore.Option) *sqlstore.Store
	}{{"SQLite", dbtest.NewSQLite}, {"MariaDB", dbtest.NewMySQL}} {
		t.Run(db.name, func(t *testing.T) {
			e := startCF(t, db.open(t))
			users := falconv1.NewUserServiceClient(e.UserConn)
			exps := falconv1.NewExperimentServiceClient(e.UserConn)
			oldAda, newAda := e.iss.Token("ada@example.com"), e.withSub("ada@example.com", "sub-ada-recreated")
			bob, root := e.iss.Token("bob@example.com"), e.iss.Token(admin)

			x, err := exps.CreateExp(as(oldAda), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
				Name: "adas", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, tok := range []string{bob, root} {
				if _, err := users.GetCurrentUser(as(tok), &falconv1.GetCurrentUserRequest{}); err != nil {
					t.Fatal(err)
				}
			}

			// Locked out, told how to get back in.
			_, err = exps.ListExps(as(newAda), &falconv1.ListExpsRequest{})
			if st := status.Convert(err); st.Code() != codes.PermissionDenied ||
				!strings.Contains(st.Message(), "falcon user relink ada@example.com --sub sub-ada-recreated") {
				t.Fatalf("the recreated identity's call: %v; want PermissionDenied naming the relink command", err)
			}
			if !strings.Contains(e.logs.String(), "fix=\"falcon user relink ada@example.com --sub sub-ada-recreated\"") {
				t.Errorf("the server log does not name the fix:\n%s", e.logs)
			}
			usersBefore, expsBefore := owners(t, e.Store)

			// Refused: not an admin; the sub of another user.
			_, err = users.RelinkUser(as(bob), &falconv1.RelinkUserRequest{Email: "ada@example.com", Sub: "sub-ada-recreated"})
			if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), adminRequired) {
				t.Errorf("bob relinking: %v; want PermissionDenied", err)
			}
			_, err = users.RelinkUser(as(root), &falconv1.RelinkUserRequest{Email: "ada@example.com", Sub: "sub-bob@example.com"})
			if st := status.Convert(err); st.Code() != codes.AlreadyExists ||
				!strings.Contains(st.Message(), `sub: "sub-bob@example.com" is already the identity of bob@example.com`) {
				t.Errorf("relinking to bob's sub: %v; want AlreadyExists naming sub and bob", err)
			}
			for _, tc := range []struct {
				name string
				req  *falconv1.RelinkUserRequest
				code codes.Code
				want string
			}{
				{"unknown email", &falconv1.RelinkUserRequest{Email: "eve@example.com", Sub: "s"}, codes.NotFound, "email: no user is registered with eve@example.com"},
				{"no sub", &falconv1.RelinkUserRequest{Email: "ada@example.com"}, codes.InvalidArgument, "sub: is required"},
				{"sub with spaces", &falconv1.RelinkUserRequest{Email: "ada@example.com", Sub: "a b"}, codes.InvalidArgument, `sub: "a b" contains spaces`},
			} {
				_, err := users.RelinkUser(as(root), tc.req)
				if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
					t.Errorf("%s: %v; want %s saying %q", tc.name, err, tc.code, tc.want)
				}
			}
			if u, x := owners(t, e.Store); !cmp.Equal(usersBefore, u) || !cmp.Equal(expsBefore, x) {
				t.Fatalf("refused relinks changed users %v -> %v, owners %v -> %v", usersBefore, u, expsBefore, x)
			}

			// The admin relinks, over HTTP as the CLI does.
			code, body := e.get(t, "POST", "/v1/users:relink", `{"email": "Ada@Example.com", "sub": "sub-ada-recreated"}`,
				http.Header{auth.AssertionHeader: {root}})
			if code != http.StatusOK || body["changed"] != true || body["previous_user_id"] != "sub-ada@example.com" || body["experiments"] != "1" {
				t.Fatalf("relink: %d %v", code, body)
			}

			// Ada is back as herself: her experiment is hers to abort.
			me, err := users.GetCurrentUser(as(newAda), &falconv1.GetCurrentUserRequest{})
			if err != nil || me.GetUserId() != "sub-ada-recreated" || me.GetEmail() != "ada@example.com" {
				t.Fatalf("the recreated identity after the relink: %v, %v", me, err)
			}
			list, err := exps.ListExps(as(newAda), &falconv1.ListExpsRequest{Creator: "ada@example.com"})
			if err != nil || len(list.GetItems()) != 1 || list.GetItems()[0].GetCreatorId() != "sub-ada-recreated" {
				t.Fatalf("ada's experiments after the relink: %v, %v", list, err)
			}
			if _, err := exps.AbortExp(as(newAda), &falconv1.AbortExpRequest{Id: x.GetId()}); err != nil {
				t.Errorf("ada aborting her own experiment after the relink: %v", err)
			}
			// The old identity, admitted a moment ago, is not any more.
			if _, err := exps.ListExps(as(oldAda), &falconv1.ListExpsRequest{}); status.Code(err) != codes.PermissionDenied {
				t.Errorf("the old identity after the relink: %v; want PermissionDenied", err)
			}

			// Again: nothing to do, and no error.
			again, err := users.RelinkUser(as(root), &falconv1.RelinkUserRequest{Email: "ada@example.com", Sub: "sub-ada-recreated"})
			if err != nil || again.GetChanged() || again.GetExperiments() != 0 {
				t.Errorf("relinking again: %v, %v; want no change", again, err)
			}

			entries, _, err := e.Store.ListAudit(context.Background(), store.AuditFilter{Method: falconv1.UserService_RelinkUser_FullMethodName})
			if err != nil {
				t.Fatal(err)
			}
			type row struct{ Actor, Target, Outcome, Detail string }
			var got []row
			for i := len(entries) - 1; i >= 0; i-- {
				en := entries[i]
				got = append(got, row{en.ActorEmail, en.TargetID, en.Outcome, en.Detail})
			}
			want := []row{
				{"bob@example.com", "ada@example.com", "PermissionDenied", "permission denied: RelinkUser: an admin is required; bob@example.com is not an admin of this server"},
				{admin, "ada@example.com", "AlreadyExists", `sub: "sub-bob@example.com" is already the identity of bob@example.com; one identity is one user, so ada@example.com was not moved`},
				{admin, "eve@example.com", "NotFound", "email: no user is registered with eve@example.com"},
				{admin, "ada@example.com", "InvalidArgument", "sub: is required: the new identity's Cloudflare Access subject, which the refusal of its calls names"},
				{admin, "ada@example.com", "InvalidArgument", `sub: "a b" contains spaces; a Cloudflare Access subject has none`},
				{admin, "ada@example.com", "ok", "user_id sub-ada@example.com -> sub-ada-recreated; 1 experiments moved"},
				{admin, "ada@example.com", "ok", "already linked to sub-ada-recreated; nothing changed"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("audit log of RelinkUser (-want +got):\n%s", diff)
			}
		})
	}
}

// Listing users shows everyone's email: admins only. Each user says
// whether the server names them an admin by email.
func TestListUsers(t *testing.T) {
	e := startCFAdmins(t, nil, admin, "group:falcon-admins")
	users := falconv1.NewUserServiceClient(e.UserConn)
	bob, root := e.iss.Token("bob@example.com"), e.iss.Token(admin)
	if _, err := users.GetCurrentUser(as(bob), &falconv1.GetCurrentUserRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := users.ListUsers(as(bob), &falconv1.ListUsersRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("bob listing users: %v; want PermissionDenied", err)
	}
	if _, err := falconv1.NewUserServiceClient(e.Conn).ListUsers(context.Background(), &falconv1.ListUsersRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a controller listing users: %v; want PermissionDenied", err)
	}
	resp, err := users.ListUsers(as(root), &falconv1.ListUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, Email string
		Admin     bool
	}
	var got []row
	for _, u := range resp.GetItems() {
		got = append(got, row{u.GetUserId(), u.GetEmail(), u.GetAdmin()})
		if u.GetCreatedAt() == nil {
			t.Errorf("%s has no created_at", u.GetEmail())
		}
	}
	want := []row{{"sub-bob@example.com", "bob@example.com", false}, {"sub-" + admin, admin, true}}
	if diff := cmp.Diff(want, got); diff != "" || !resp.GetAdminsByGroup() {
		t.Errorf("ListUsers (-want +got):\n%s\nadmins_by_group %v", diff, resp.GetAdminsByGroup())
	}
}
