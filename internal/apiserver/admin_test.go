package apiserver_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// adminRequired is how a refusal for want of an admin reads.
const adminRequired = "an admin is required"

// clusterWrite is one of the admin-only cluster calls, over gRPC and over
// the HTTP gateway.
type clusterWrite struct {
	name       string
	grpc       func(context.Context, falconv1.ClusterServiceClient) error
	httpMethod string
	path, body string
}

func clusterWrites() []clusterWrite {
	return []clusterWrite{
		{
			name: "RegisterCluster",
			grpc: func(ctx context.Context, c falconv1.ClusterServiceClient) error {
				_, err := c.RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
					Name: "lab", Backend: "kubernetes", Kubeconfig: "/etc/falcon/kubeconfig", KubeContext: "lab"}})
				return err
			},
			httpMethod: "POST", path: "/v1/clusters",
			body: `{"name": "lab", "backend": "kubernetes", "kubeconfig": "/etc/falcon/kubeconfig", "kube_context": "lab"}`,
		},
		{
			name: "ApplyClusters",
			grpc: func(ctx context.Context, c falconv1.ClusterServiceClient) error {
				_, err := c.ApplyClusters(ctx, &falconv1.ApplyClustersRequest{Clusters: []*falconv1.Cluster{
					{Name: "lab", Backend: "kubernetes", Kubeconfig: "/etc/falcon/kubeconfig", KubeContext: "lab"}}})
				return err
			},
			httpMethod: "POST", path: "/v1/clusters:apply",
			body: `{"clusters": [{"name": "lab", "backend": "kubernetes", "kubeconfig": "/etc/falcon/kubeconfig", "kube_context": "lab"}]}`,
		},
		{
			name: "SetClusterStatus",
			grpc: func(ctx context.Context, c falconv1.ClusterServiceClient) error {
				_, err := c.SetClusterStatus(ctx, &falconv1.SetClusterStatusRequest{Name: "local", Status: "maintenance"})
				return err
			},
			httpMethod: "POST", path: "/v1/clusters/local:setStatus", body: `{"status": "maintenance"}`,
		},
	}
}

// Cluster writes decide where everyone's jobs run: an admin's, refused to
// other users and service tokens over gRPC and HTTP alike, and every
// attempt is in the audit log.
func TestClusterWritesNeedAnAdmin(t *testing.T) {
	e := startCF(t, nil)
	alice, root := e.iss.Token("alice@example.com"), e.iss.Token(admin)
	// A service token cannot be an admin, whatever groups it carries.
	svcClaims := e.iss.ServiceClaims("ci-bot.access")
	svcClaims["groups"] = []string{"falcon-admins"}
	svc := authtest.Sign(e.iss.Key(), svcClaims)
	clusters := falconv1.NewClusterServiceClient(e.UserConn)
	for _, w := range clusterWrites() {
		t.Run(w.name, func(t *testing.T) {
			before := listClusters(t, falconv1.NewClusterServiceClient(e.Conn))
			for who, tok := range map[string]string{"a user": alice, "a service token": svc} {
				err := w.grpc(as(tok), clusters)
				if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), adminRequired) {
					t.Errorf("%s over gRPC: %v; want PermissionDenied saying %q", who, err, adminRequired)
				}
				code, body := e.get(t, w.httpMethod, w.path, w.body, http.Header{auth.AssertionHeader: {tok}})
				if msg, _ := body["message"].(string); code != http.StatusForbidden || !strings.Contains(msg, adminRequired) {
					t.Errorf("%s over HTTP: %d %v; want 403 saying %q", who, code, body, adminRequired)
				}
			}
			if diff := cmp.Diff(clusterNames(before), clusterNames(listClusters(t, falconv1.NewClusterServiceClient(e.Conn)))); diff != "" {
				t.Errorf("refused calls changed the registry (-before +after):\n%s", diff)
			}

			if err := w.grpc(as(root), clusters); err != nil {
				t.Errorf("the admin over gRPC: %v", err)
			}
			if code, body := e.get(t, w.httpMethod, w.path, w.body, http.Header{auth.AssertionHeader: {root}}); code != http.StatusOK {
				t.Errorf("the admin over HTTP: %d %v", code, body)
			}

			entries, _, err := e.Store.ListAudit(context.Background(), store.AuditFilter{Method: "/falcon.v1.ClusterService/" + w.name})
			if err != nil {
				t.Fatal(err)
			}
			type row struct{ Actor, Outcome string }
			var got []row
			for i := len(entries) - 1; i >= 0; i-- {
				actor := entries[i].ActorEmail
				if actor == "" {
					actor = entries[i].ActorID
				}
				got = append(got, row{actor, entries[i].Outcome})
				if entries[i].Outcome != store.AuditOK && !strings.Contains(entries[i].Detail, adminRequired) {
					t.Errorf("refusal audited without its reason: %+v", entries[i])
				}
			}
			// The map above is walked in random order; compare as a set.
			want := map[row]int{
				{"alice@example.com", "PermissionDenied"}: 2, {"service:ci-bot.access", "PermissionDenied"}: 2,
				{admin, store.AuditOK}: 2,
			}
			counts := map[row]int{}
			for _, r := range got {
				counts[r]++
			}
			if diff := cmp.Diff(want, counts); diff != "" {
				t.Errorf("audit of %s (-want +got):\n%s", w.name, diff)
			}
		})
	}
}

func clusterNames(cs []*falconv1.Cluster) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.GetName()+"/"+c.GetBackend()+"/"+c.GetStatus())
	}
	return out
}

// Without authentication (falcon dev, falcon server --auth none) every
// call is the local user's, who administers the server: cluster writes
// and the audit log work for them, over gRPC and HTTP.
func TestLocalUserIsAdmin(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	clusters := falconv1.NewClusterServiceClient(env.UserConn)
	for _, w := range clusterWrites() {
		if err := w.grpc(context.Background(), clusters); err != nil {
			t.Errorf("%s over gRPC: %v", w.name, err)
		}
		req, _ := http.NewRequest(w.httpMethod, "http://"+env.HTTPAddr+w.path, strings.NewReader(w.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s over HTTP: %d", w.name, resp.StatusCode)
		}
	}
	resp, err := falconv1.NewAuditServiceClient(env.UserConn).ListAuditEvents(context.Background(), &falconv1.ListAuditEventsRequest{})
	if err != nil || len(resp.GetItems()) != 6 {
		t.Fatalf("the local user reading the audit log: %d events, %v; want the 6 cluster writes", len(resp.GetItems()), err)
	}
	if who := resp.GetItems()[0].GetActorEmail(); who != auth.LocalUser().Email {
		t.Errorf("audited as %q, want the local user %q", who, auth.LocalUser().Email)
	}
}

// A controller registers the local cluster it runs (falcon controller
// --local-cluster) and nothing else, so its secret cannot repoint jobs.
func TestControllerRegistersOnlyItsLocalCluster(t *testing.T) {
	e := startCF(t, nil)
	ctl := falconv1.NewClusterServiceClient(e.Conn)
	root := e.iss.Token(admin)
	if _, err := falconv1.NewClusterServiceClient(e.UserConn).RegisterCluster(as(root), &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
		Name: "lab", Backend: "kubernetes", Kubeconfig: "/k", KubeContext: "lab"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cluster *falconv1.Cluster
		refusal string // empty: allowed
	}{
		{"its local cluster", &falconv1.Cluster{Name: "box", Backend: "local"}, ""},
		{"its local cluster again", &falconv1.Cluster{Name: "box", Backend: "local", Location: "here"}, ""},
		{"a kubernetes cluster", &falconv1.Cluster{Name: "lab2", Backend: "kubernetes", Kubeconfig: "/k", KubeContext: "x"}, "controllers may register only a local cluster"},
		{"a gke cluster", &falconv1.Cluster{Name: "tpu", Backend: "gke", Project: "p", Location: "us-east5-a", GkeCluster: "tpu"}, "controllers may register only a local cluster"},
		{"a local cluster in place of an admin's", &falconv1.Cluster{Name: "lab", Backend: "local"}, "cluster lab is a kubernetes cluster"},
	}
	for _, tt := range tests {
		_, err := ctl.RegisterCluster(context.Background(), &falconv1.RegisterClusterRequest{Cluster: tt.cluster})
		switch st := status.Convert(err); {
		case tt.refusal == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.refusal != "" && (st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), tt.refusal)):
			t.Errorf("%s: %v; want PermissionDenied containing %q", tt.name, err, tt.refusal)
		}
	}
	got, err := ctl.GetCluster(context.Background(), &falconv1.GetClusterRequest{Name: "lab"})
	if err != nil || got.GetBackend() != "kubernetes" {
		t.Errorf("the admin's cluster after the controller's attempt: %v, %v", got, err)
	}

	// An admin takes the local cluster out of service; the controller
	// restarting (registering it again) does not bring it back.
	if _, err := falconv1.NewClusterServiceClient(e.UserConn).SetClusterStatus(as(root), &falconv1.SetClusterStatusRequest{Name: "box", Status: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.RegisterCluster(context.Background(), &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{Name: "box", Backend: "local"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := ctl.GetCluster(context.Background(), &falconv1.GetClusterRequest{Name: "box"}); err != nil || got.GetStatus() != "maintenance" {
		t.Errorf("local cluster after the controller registered it again: %s, %v; want maintenance kept", got.GetStatus(), err)
	}
}

// The audit log is the admins': others are refused, and an admin filters it
// by experiment, actor and method, a page at a time, over gRPC and HTTP.
func TestListAuditEvents(t *testing.T) {
	e := startCF(t, nil)
	alice, bob, root := e.iss.Token("alice@example.com"), e.iss.Token("bob@example.com"), e.iss.Token(admin)
	exps := falconv1.NewExperimentServiceClient(e.UserConn)
	newExp := func(name string) string {
		x, err := exps.CreateExp(as(alice), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: name, RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		return x.GetId()
	}
	id, other := newExp("audited"), newExp("other")
	if _, err := exps.AbortExp(as(bob), &falconv1.AbortExpRequest{Id: id}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("bob aborting alice's: %v", err)
	}
	if _, err := exps.AbortExp(as(root), &falconv1.AbortExpRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	audit := falconv1.NewAuditServiceClient(e.UserConn)

	t.Run("refused to non-admins", func(t *testing.T) {
		svc := authtest.Sign(e.iss.Key(), e.iss.ServiceClaims("ci-bot.access"))
		for who, tok := range map[string]string{"a user": alice, "a service token": svc} {
			_, err := audit.ListAuditEvents(as(tok), &falconv1.ListAuditEventsRequest{})
			if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), adminRequired) {
				t.Errorf("%s over gRPC: %v", who, err)
			}
			if code, body := e.get(t, "GET", "/v1/audit", "", http.Header{auth.AssertionHeader: {tok}}); code != http.StatusForbidden {
				t.Errorf("%s over HTTP: %d %v", who, code, body)
			}
		}
		if _, err := falconv1.NewAuditServiceClient(e.Conn).ListAuditEvents(context.Background(), &falconv1.ListAuditEventsRequest{}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("the controller: %v", err)
		}
	})

	type row struct{ Actor, Method, Outcome, Target string }
	rows := func(items []*falconv1.AuditEvent) []row {
		var out []row
		for _, ev := range items {
			if ev.GetAt() == nil || ev.GetActorId() == "" {
				t.Errorf("event without time or actor: %v", ev)
			}
			out = append(out, row{ev.GetActorEmail(), ev.GetMethod()[strings.LastIndex(ev.GetMethod(), "/")+1:], ev.GetOutcome(), ev.GetTargetId()})
		}
		return out
	}
	tests := []struct {
		name string
		req  *falconv1.ListAuditEventsRequest
		want []row // newest first
	}{
		{"by experiment", &falconv1.ListAuditEventsRequest{ExpId: id}, []row{
			{admin, "AbortExp", "ok", id}, {"bob@example.com", "AbortExp", "PermissionDenied", id}, {"alice@example.com", "CreateExp", "ok", id}}},
		{"by actor, any case", &falconv1.ListAuditEventsRequest{Actor: "Alice@Example.com"}, []row{
			{"alice@example.com", "CreateExp", "ok", other}, {"alice@example.com", "CreateExp", "ok", id}}},
		{"by actor's user_id", &falconv1.ListAuditEventsRequest{Actor: "sub-bob@example.com"}, []row{
			{"bob@example.com", "AbortExp", "PermissionDenied", id}}},
		{"by method name", &falconv1.ListAuditEventsRequest{Method: "abortexp"}, []row{
			{admin, "AbortExp", "ok", id}, {"bob@example.com", "AbortExp", "PermissionDenied", id}}},
		{"by full method and experiment", &falconv1.ListAuditEventsRequest{Method: "/falcon.v1.ExperimentService/CreateExp", ExpId: other}, []row{
			{"alice@example.com", "CreateExp", "ok", other}}},
		{"no match", &falconv1.ListAuditEventsRequest{Actor: "nobody@example.com"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := audit.ListAuditEvents(as(root), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, rows(resp.GetItems())); diff != "" {
				t.Errorf("gRPC (-want +got):\n%s", diff)
			}
			q := url.Values{}
			for k, v := range map[string]string{"exp_id": tt.req.GetExpId(), "actor": tt.req.GetActor(), "method": tt.req.GetMethod()} {
				if v != "" {
					q.Set(k, v)
				}
			}
			code, body := e.get(t, "GET", "/v1/audit?"+q.Encode(), "", http.Header{auth.AssertionHeader: {root}})
			items, _ := body["items"].([]any)
			if code != http.StatusOK || len(items) != len(tt.want) {
				t.Errorf("HTTP: %d %v; want %d items", code, body, len(tt.want))
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		var got []row
		token := ""
		for range 10 {
			q := url.Values{"page_size": {"1"}, "exp_id": {id}}
			if token != "" {
				q.Set("page_token", token)
			}
			code, body := e.get(t, "GET", "/v1/audit?"+q.Encode(), "", http.Header{auth.AssertionHeader: {root}})
			items, _ := body["items"].([]any)
			if code != http.StatusOK || len(items) != 1 {
				t.Fatalf("page: %d %v", code, body)
			}
			ev := items[0].(map[string]any)
			got = append(got, row{ev["actor_email"].(string), ev["method"].(string)[strings.LastIndex(ev["method"].(string), "/")+1:], ev["outcome"].(string), ev["target_id"].(string)})
			if token, _ = body["next_page_token"].(string); token == "" {
				break
			}
		}
		want := []row{{admin, "AbortExp", "ok", id}, {"bob@example.com", "AbortExp", "PermissionDenied", id}, {"alice@example.com", "CreateExp", "ok", id}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("paged (-want +got):\n%s", diff)
		}
	})

	t.Run("bad filters", func(t *testing.T) {
		for _, tc := range []struct {
			query, field, says string
		}{
			// The list grows with every audited method; its start and its
			// order are what a user reads.
			{"method=GetExp", "method", "not an audited method; allowed: AbortExp, ApplyClusters, "},
			{"exp_id=job-0000000000", "exp_id", "is not an experiment ID"},
			{"page_size=5000", "page_size", "between 0"},
			{"page_token=garbage", "page_token", "not a token this server issued"},
		} {
			code, body := e.get(t, "GET", "/v1/audit?"+tc.query, "", http.Header{auth.AssertionHeader: {root}})
			if msg, _ := body["message"].(string); code != http.StatusBadRequest || !strings.Contains(msg, tc.field+": ") || !strings.Contains(msg, tc.says) {
				t.Errorf("%s: %d %v; want 400 naming %s", tc.query, code, body, tc.field)
			}
		}
	})
}
