package sqlstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// The audit log is read by admins filtered by who acted and how; each
// filter narrows the others, on both backends.
func TestAuditFilters(t *testing.T) {
	t.Parallel()
	for _, db := range []struct {
		name string
		open opener
	}{{"SQLite", dbtest.NewSQLite}, {"MariaDB", dbtest.NewMySQL}} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			s := db.open(t)
			bg := context.Background()
			const create, abort = "/falcon.v1.ExperimentService/CreateExp", "/falcon.v1.ExperimentService/AbortExp"
			for _, en := range []store.AuditEntry{
				{ActorID: "u-ada", ActorEmail: "ada@example.com", Method: create, TargetID: "exp-1", Outcome: store.AuditOK, Detail: "1"},
				{ActorID: "u-bob", ActorEmail: "bob@example.com", Method: abort, TargetID: "exp-1", Outcome: "PermissionDenied", Detail: "2"},
				{ActorID: "u-ada", ActorEmail: "ada@example.com", Method: abort, TargetID: "exp-1", Outcome: store.AuditOK, Detail: "3"},
				{ActorID: "service:ci", Method: create, TargetID: "exp-2", Outcome: store.AuditOK, Detail: "4"},
			} {
				if err := s.AppendAudit(bg, en); err != nil {
					t.Fatal(err)
				}
			}
			tests := []struct {
				name string
				f    store.AuditFilter
				want []string // details, newest first
			}{
				{"by email, any case", store.AuditFilter{Actor: "Ada@Example.com"}, []string{"3", "1"}},
				{"by method", store.AuditFilter{Method: abort}, []string{"3", "2"}},
				{"by method and target", store.AuditFilter{Method: create, TargetID: "exp-1"}, []string{"1"}},
				{"by email, method and target", store.AuditFilter{Actor: "bob@example.com", Method: abort, TargetID: "exp-1"}, []string{"2"}},
				{"by user_id of a service token", store.AuditFilter{Actor: "service:ci"}, []string{"4"}},
				{"by user_id of a person", store.AuditFilter{Actor: "u-bob"}, []string{"2"}},
				{"nothing matches", store.AuditFilter{Actor: "bob@example.com", Method: create}, nil},
			}
			for _, tt := range tests {
				got, next, err := s.ListAudit(bg, tt.f)
				if err != nil || next != "" {
					t.Fatalf("%s: next %q, %v", tt.name, next, err)
				}
				var details []string
				for _, en := range got {
					details = append(details, en.Detail)
				}
				if diff := cmp.Diff(tt.want, details); diff != "" {
					t.Errorf("%s (-want +got):\n%s", tt.name, diff)
				}
			}
			// Pages follow the filter.
			page1, next, err := s.ListAudit(bg, store.AuditFilter{Method: abort, Page: store.Page{Size: 1}})
			if err != nil || len(page1) != 1 || page1[0].Detail != "3" || next == "" {
				t.Fatalf("page 1: %+v, next %q, %v", page1, next, err)
			}
			page2, next, err := s.ListAudit(bg, store.AuditFilter{Method: abort, Page: store.Page{Size: 1, Token: next}})
			if err != nil || len(page2) != 1 || page2[0].Detail != "2" || next != "" {
				t.Fatalf("page 2: %+v, next %q, %v", page2, next, err)
			}
		})
	}
}

// The calls refused before authentication are counted, one entry per
// source and reason per minute: it has no actor, and says how many calls
// it stands for and where they came from; every other entry stands for one.
func testAuditCounts(t *testing.T, e env) {
	bg := context.Background()
	agg := store.AuditEntry{At: t0, Method: store.AuditUnauthenticated, Outcome: "Unauthenticated",
		Detail: "malformed token; methods: ListExps", Count: 7, Source: "203.0.113.9"}
	if err := e.s.AppendAudit(bg, agg); err != nil {
		t.Fatal(err)
	}
	if err := e.s.AppendAudit(bg, store.AuditEntry{ActorID: "u-ada", Method: "/falcon.v1.ExperimentService/CreateExp", Outcome: store.AuditOK, Source: "198.51.100.2"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []store.AuditEntry{
		{Method: "/falcon.v1.ExperimentService/CreateExp", Outcome: store.AuditOK, Count: 3}, // only the refusal count has no actor
		{Method: store.AuditUnauthenticated, Outcome: "Unauthenticated", Count: -1},
	} {
		if err := e.s.AppendAudit(bg, bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("AppendAudit(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	got, _, err := e.s.ListAudit(bg, store.AuditFilter{Method: store.AuditUnauthenticated})
	if err != nil {
		t.Fatal(err)
	}
	agg.At = t0us
	if len(got) == 1 {
		agg.Seq = got[0].Seq
	}
	if diff := cmp.Diff([]*store.AuditEntry{&agg}, got); diff != "" {
		t.Errorf("ListAudit(unauthenticated) (-want +got):\n%s", diff)
	}
	all, _, err := e.s.ListAudit(bg, store.AuditFilter{ActorID: "u-ada"})
	if err != nil || len(all) != 1 || all[0].Count != 1 || all[0].Source != "198.51.100.2" {
		t.Errorf("a call's entry: %+v, %v; want count 1 and its source", all, err)
	}
}
