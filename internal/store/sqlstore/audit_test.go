package sqlstore_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

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
