package sqlstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/store/sqlstore"
)

// userState is what a relink may change: every user, and who owns each
// experiment.
type userState struct {
	Users  []*store.User
	Owners map[string]string // experiment name -> creator_id
}

func readUserState(t *testing.T, s *sqlstore.Store) userState {
	t.Helper()
	users, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exps, _, err := s.ListExps(ctx, store.ExpFilter{})
	if err != nil {
		t.Fatal(err)
	}
	st := userState{Users: users, Owners: map[string]string{}}
	for _, x := range exps {
		st.Owners[x.Name] = x.CreatorID
	}
	return st
}

// A person whose Cloudflare identity was recreated keeps their email and
// gets a new sub; a relink moves their row and their experiments to it in
// one transaction, and refuses, changing nothing, what would give one
// identity to two users or name nobody.
func testRelinkUser(t *testing.T, e env) {
	for _, u := range []*store.User{
		{UserID: "u-ada-old", Email: "ada@example.com"},
		{UserID: "u-bob", Email: "bob@example.com"},
		{UserID: "service:ci"},
	} {
		if _, err := e.s.EnsureUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, email, id string }{
		{"ada-one", "ada@example.com", "u-ada-old"},
		{"ada-two", "ada@example.com", "u-ada-old"},
		{"bobs", "bob@example.com", "u-bob"},
	} {
		exp, jobs, art := newExp(c.name)
		exp.Creator, exp.CreatorID = c.email, c.id
		mustCreate(t, e.s, exp, jobs, art)
	}
	if err := e.s.AppendAudit(ctx, store.AuditEntry{ActorID: "u-ada-old", ActorEmail: "ada@example.com",
		Method: "/falcon.v1.ExperimentService/CreateExp", TargetID: "ada-one", Outcome: store.AuditOK}); err != nil {
		t.Fatal(err)
	}
	// The new identity is locked out: its email names the old one.
	if _, err := e.s.EnsureUser(ctx, &store.User{UserID: "u-ada-new", Email: "ada@example.com"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("EnsureUser(new sub, same email) = %v, want ErrAlreadyExists", err)
	}
	before := readUserState(t, e.s)

	refused := []struct {
		name, email, id string
		kind            error
		want            string // in the message
	}{
		{"unknown email", "eve@example.com", "u-eve", errdefs.ErrNotFound, "email: no user is registered with eve@example.com"},
		{"sub of another user", "ada@example.com", "u-bob", errdefs.ErrAlreadyExists, `user_id "u-bob" is already registered to bob@example.com`},
		{"sub of a service principal", "ada@example.com", "service:ci", errdefs.ErrAlreadyExists, `user_id "service:ci" is already registered to service:ci`},
		{"no sub", "ada@example.com", "", errdefs.ErrInvalid, "user_id: is required"},
		{"no email", " ", "u-ada-new", errdefs.ErrInvalid, "email: is required"},
	}
	for _, tc := range refused {
		_, err := e.s.RelinkUser(ctx, tc.email, tc.id)
		if !errors.Is(err, tc.kind) || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: RelinkUser(%q, %q) = %v, want %v saying %q", tc.name, tc.email, tc.id, err, tc.kind, tc.want)
		}
		var taken *store.UserIDTakenError
		if tc.kind == errdefs.ErrAlreadyExists && (!errors.As(err, &taken) || taken.UserID != tc.id) {
			t.Errorf("%s: %v is not a UserIDTakenError naming %s", tc.name, err, tc.id)
		}
		if diff := cmp.Diff(before, readUserState(t, e.s)); diff != "" {
			t.Errorf("%s changed users or owners (-before +after):\n%s", tc.name, diff)
		}
	}

	// Any case and spacing of the email finds the user.
	got, err := e.s.RelinkUser(ctx, " Ada@Example.COM", "u-ada-new")
	if err != nil {
		t.Fatal(err)
	}
	want := &store.UserRelink{User: &store.User{UserID: "u-ada-new", Email: "ada@example.com", CreatedAt: t0us}, PreviousID: "u-ada-old", Experiments: 2}
	if diff := cmp.Diff(want, got); diff != "" || !got.Changed() {
		t.Errorf("RelinkUser (-want +got):\n%s", diff)
	}
	after := readUserState(t, e.s)
	wantAfter := userState{
		Users: []*store.User{
			{UserID: "service:ci", CreatedAt: t0us},
			{UserID: "u-ada-new", Email: "ada@example.com", CreatedAt: t0us},
			{UserID: "u-bob", Email: "bob@example.com", CreatedAt: t0us},
		},
		Owners: map[string]string{"ada-one": "u-ada-new", "ada-two": "u-ada-new", "bobs": "u-bob"},
	}
	if diff := cmp.Diff(wantAfter, after); diff != "" {
		t.Errorf("after the relink (-want +got):\n%s", diff)
	}
	// The new identity is admitted as the same user; the old one is now
	// the stranger.
	if u, err := e.s.EnsureUser(ctx, &store.User{UserID: "u-ada-new", Email: "ada@example.com"}); err != nil || !u.CreatedAt.Equal(t0us) {
		t.Errorf("EnsureUser(new sub) after the relink = %+v, %v", u, err)
	}
	if _, err := e.s.EnsureUser(ctx, &store.User{UserID: "u-ada-old", Email: "ada@example.com"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("EnsureUser(old sub) after the relink = %v, want ErrAlreadyExists", err)
	}
	// The audit log is history: it keeps the user_id that acted then.
	if log, _, err := e.s.ListAudit(ctx, store.AuditFilter{ActorID: "u-ada-old"}); err != nil || len(log) != 1 {
		t.Errorf("audit entries of the old user_id after the relink: %d, %v", len(log), err)
	}

	// Relinking to the sub the user has is no error and changes nothing.
	same, err := e.s.RelinkUser(ctx, "ada@example.com", "u-ada-new")
	if err != nil || same.Changed() || same.Experiments != 0 || same.PreviousID != "u-ada-new" {
		t.Errorf("RelinkUser(same sub) = %+v, %v; want no change", same, err)
	}
	if diff := cmp.Diff(after, readUserState(t, e.s)); diff != "" {
		t.Errorf("relinking to the same sub changed something (-before +after):\n%s", diff)
	}
}

// A relink that fails midway leaves the user and every experiment as they
// were: the user row is not moved without the experiments.
func testRelinkUserRollsBack(t *testing.T, e env) {
	if _, err := e.s.EnsureUser(ctx, &store.User{UserID: "u-ada-old", Email: "ada@example.com"}); err != nil {
		t.Fatal(err)
	}
	exp, jobs, art := newExp("adas")
	exp.CreatorID = "u-ada-old"
	mustCreate(t, e.s, exp, jobs, art)
	before := readUserState(t, e.s)

	// The experiments' update, which comes after the user's, fails.
	trigger := "CREATE TRIGGER relink_fails BEFORE UPDATE OF creator_id ON experiments BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
	if e.s.Dialect() == "mysql" {
		trigger = "CREATE TRIGGER relink_fails BEFORE UPDATE ON experiments FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'"
	}
	if err := e.s.Exec(ctx, trigger); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RelinkUser(ctx, "ada@example.com", "u-ada-new"); err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("RelinkUser with a failing experiments update = %v", err)
	}
	if diff := cmp.Diff(before, readUserState(t, e.s)); diff != "" {
		t.Errorf("a failed relink left changes (-before +after):\n%s", diff)
	}
	if err := e.s.Exec(ctx, "DROP TRIGGER relink_fails"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RelinkUser(ctx, "ada@example.com", "u-ada-new"); err != nil {
		t.Fatalf("RelinkUser once the update works: %v", err)
	}
}
