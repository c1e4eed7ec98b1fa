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
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/store"
)

// TestForceAbort: a forced abort is the owner's or an admin's, like an
// abort; it ends an experiment stuck Aborting, and its jobs, Aborted at
// once, each job saying who forced it and that the cluster never confirmed
// the stop; and the audit log shows it was forced.
func TestForceAbort(t *testing.T) {
	for _, db := range stores {
		t.Run(db.name, func(t *testing.T) {
			e := startCF(t, db.open(t))
			ctx := context.Background()
			alice, bob, root := e.iss.Token("alice@example.com"), e.iss.Token("bob@example.com"), e.iss.Token(admin)
			exps := falconv1.NewExperimentServiceClient(e.UserConn)
			create := func(name string) string {
				exp, err := exps.CreateExp(as(alice), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
					Name: name, RoleToTaskSpec: map[string]*falconv1.TaskSpec{
						"main": {Command: "x", Replica: 1}, "worker": {Command: "y", Replica: 2}}}})
				if err != nil {
					t.Fatal(err)
				}
				return exp.GetId()
			}
			stuck := create("stuck")
			// The cluster never answers the abort: the jobs stay Aborting.
			if _, err := exps.AbortExp(as(alice), &falconv1.AbortExpRequest{Id: stuck}); err != nil {
				t.Fatal(err)
			}

			// Bob may not force it, over gRPC or HTTP.
			_, err := exps.AbortExp(as(bob), &falconv1.AbortExpRequest{Id: stuck, Force: true})
			if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "only its creator or an admin may force-abort it") {
				t.Fatalf("bob forcing: %v; want PermissionDenied", err)
			}
			if code, body := e.get(t, "POST", "/v1/experiments/"+stuck+":abort", `{"force": true}`, http.Header{auth.AssertionHeader: {bob}}); code != http.StatusForbidden {
				t.Fatalf("bob forcing over HTTP: %d %v", code, body)
			}
			if got, _ := exps.GetExp(as(alice), &falconv1.GetExpRequest{Id: stuck}); got.GetStatus() != "Aborting" {
				t.Fatalf("after bob's refused force the experiment is %s, want still Aborting", got.GetStatus())
			}

			// An admin may, over HTTP.
			code, body := e.get(t, "POST", "/v1/experiments/"+stuck+":abort", `{"force": true, "reason": "cluster deleted"}`, http.Header{auth.AssertionHeader: {root}})
			if code != http.StatusOK || body["changed"] != true || !strings.Contains(body["message"].(string), "without waiting for its clusters") {
				t.Fatalf("admin forcing over HTTP: %d %v", code, body)
			}
			got, err := exps.GetExp(as(alice), &falconv1.GetExpRequest{Id: stuck})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetStatus() != "Aborted" || got.GetMessage() != "force-aborted by "+admin+": cluster deleted" || got.GetAbortedAt() == nil || got.GetFinishedAt() == nil {
				t.Errorf("experiment after a forced abort: %s %q aborted_at=%v finished_at=%v", got.GetStatus(), got.GetMessage(), got.GetAbortedAt(), got.GetFinishedAt())
			}
			wantJobMsg := "force-aborted by " + admin + ": cluster deleted; the cluster never confirmed the stop: pods, processes or node pools it started may run until it does (the controller keeps asking)"
			for _, j := range got.GetJobs() {
				if j.GetStatus() != "Aborted" || j.GetReason() != "" || j.GetMessage() != wantJobMsg || j.GetAbortingAt() == nil || j.GetAbortedAt() == nil {
					t.Errorf("job %s after a forced abort: %s/%s %q aborting_at=%v aborted_at=%v", j.GetRole(), j.GetStatus(), j.GetReason(), j.GetMessage(), j.GetAbortingAt(), j.GetAbortedAt())
				}
			}
			// The expController closes the artifact as for any aborted
			// experiment, and has nothing else to do.
			if err := expctl.New(e.Conn).Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := exps.GetExp(as(alice), &falconv1.GetExpRequest{Id: stuck}); got.GetStatus() != "Aborted" || got.GetArtifact().GetStatus() != "Failed" || got.GetArtifact().GetReason() != "Aborted" {
				t.Errorf("after the expController: experiment %s, artifact %s/%s; want Aborted, Failed/Aborted",
					got.GetStatus(), got.GetArtifact().GetStatus(), got.GetArtifact().GetReason())
			}
			// Forcing what has ended changes nothing, and says so.
			again, err := exps.AbortExp(as(alice), &falconv1.AbortExpRequest{Id: stuck, Force: true})
			if err != nil || again.GetChanged() || !strings.Contains(again.GetMessage(), "already Aborted; nothing to abort") {
				t.Errorf("forcing again: %v, %v; want unchanged", again, err)
			}

			// The owner may force her own, even one nobody asked to stop yet.
			fresh := create("fresh")
			resp, err := exps.AbortExp(as(alice), &falconv1.AbortExpRequest{Id: fresh, Force: true})
			if err != nil || !resp.GetChanged() || resp.GetExperiment().GetStatus() != "Aborted" {
				t.Fatalf("alice forcing her own: %v, %v", resp, err)
			}
			for _, j := range resp.GetExperiment().GetJobs() {
				if j.GetStatus() != "Aborted" || !strings.HasPrefix(j.GetMessage(), "force-aborted by alice@example.com; the cluster never confirmed") {
					t.Errorf("job %s: %s %q", j.GetRole(), j.GetStatus(), j.GetMessage())
				}
			}

			type row struct{ Actor, Method, Outcome, Detail string }
			audit := func(id string) []row {
				entries, _, err := e.Store.ListAudit(ctx, store.AuditFilter{TargetID: id})
				if err != nil {
					t.Fatal(err)
				}
				var out []row
				for i := len(entries) - 1; i >= 0; i-- {
					en := entries[i]
					out = append(out, row{en.ActorEmail, en.Method[strings.LastIndex(en.Method, "/")+1:], en.Outcome,
						strings.Replace(en.Detail, "permission denied: ", "", 1)})
				}
				return out
			}
			refusal := "experiment " + stuck + " belongs to alice@example.com; only its creator or an admin may force-abort it"
			want := []row{
				{"alice@example.com", "CreateExp", "ok", "name=stuck"},
				{"alice@example.com", "AbortExp", "ok", "changed=true"},
				{"bob@example.com", "AbortExp", "PermissionDenied", "force=true; " + refusal},
				{"bob@example.com", "AbortExp", "PermissionDenied", "force=true; " + refusal},
				{admin, "AbortExp", "ok", "force=true; as admin; owner alice@example.com; changed=true"},
				{"alice@example.com", "AbortExp", "ok", "force=true; changed=false"},
			}
			if diff := cmp.Diff(want, audit(stuck)); diff != "" {
				t.Errorf("audit log of %s (-want +got):\n%s", stuck, diff)
			}
			if diff := cmp.Diff([]row{
				{"alice@example.com", "CreateExp", "ok", "name=fresh"},
				{"alice@example.com", "AbortExp", "ok", "force=true; changed=true"},
			}, audit(fresh)); diff != "" {
				t.Errorf("audit log of %s (-want +got):\n%s", fresh, diff)
			}
		})
	}
}
