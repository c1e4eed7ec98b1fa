package apiserver

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store/sqlstore"
)

// Every method the server registers must say who may call it: an
// unclassified method is refused to everyone, which is safe but would
// break whoever needs it.
func TestEveryMethodIsClassified(t *testing.T) {
	st, err := sqlstore.Open(t.Context(), "sqlite", "file::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := New(st).GRPCServer()
	registered := map[string]bool{}
	for svc, info := range g.GetServiceInfo() {
		for _, m := range info.Methods {
			name := "/" + svc + "/" + m.Name
			registered[name] = true
			if _, ok := rules[name]; !ok {
				t.Errorf("%s has no access rule", name)
			}
		}
	}
	for name := range rules {
		if !registered[name] {
			t.Errorf("rule for %s, which the server does not register", name)
		}
	}
}

func TestAuthorize(t *testing.T) {
	user := auth.Principal{UserID: "u", Email: "u@example.com", Kind: auth.KindUser}
	svc := auth.Principal{UserID: "service:ci", Name: "ci", Kind: auth.KindService}
	tests := []struct {
		method string
		p      auth.Principal
		admin  bool
		ok     bool
	}{
		{"/falcon.v1.ExperimentService/CreateExp", user, false, true},
		{"/falcon.v1.ExperimentService/CreateExp", svc, false, true},
		{"/falcon.v1.ExperimentService/CreateExp", auth.Controller, false, false},
		{"/falcon.v1.ExperimentService/GetExp", auth.Controller, false, true},
		{"/falcon.v1.ExperimentService/UpdateExpStatus", user, false, false},
		{"/falcon.v1.ExperimentService/UpdateExpStatus", user, true, false},
		{"/falcon.v1.ExperimentService/UpdateExpStatus", svc, false, false},
		{"/falcon.v1.ExperimentService/UpdateExpStatus", auth.Controller, false, true},
		{"/falcon.v1.JobService/WatchChanges", user, false, false},
		{"/falcon.v1.JobService/AbortJob", user, false, false},
		// The handler limits a controller to its local cluster.
		{"/falcon.v1.ClusterService/RegisterCluster", auth.Controller, false, true},
		{"/falcon.v1.ClusterService/RegisterCluster", user, false, false},
		{"/falcon.v1.ClusterService/RegisterCluster", svc, false, false},
		{"/falcon.v1.ClusterService/RegisterCluster", user, true, true},
		{"/falcon.v1.ClusterService/ApplyClusters", auth.Controller, false, false},
		{"/falcon.v1.ClusterService/ApplyClusters", user, false, false},
		{"/falcon.v1.ClusterService/ApplyClusters", user, true, true},
		{"/falcon.v1.ClusterService/SetClusterStatus", user, false, false},
		{"/falcon.v1.ClusterService/SetClusterStatus", user, true, true},
		{"/falcon.v1.AuditService/ListAuditEvents", user, false, false},
		{"/falcon.v1.AuditService/ListAuditEvents", user, true, true},
		{"/falcon.v1.AuditService/ListAuditEvents", auth.Controller, false, false},
		{"/falcon.v1.Unknown/Method", auth.Controller, false, false},
	}
	for _, tt := range tests {
		if err := authorize(tt.p, tt.admin, tt.method); (err == nil) != tt.ok {
			t.Errorf("authorize(%s, admin=%t, %s) = %v, want ok=%v", tt.p.Kind, tt.admin, tt.method, err, tt.ok)
		}
	}
}

// Job reasons belong to their status (000 section 9).
func TestCheckJobReason(t *testing.T) {
	tests := []struct {
		status lifecycle.Status
		reason string
		err    string // empty: allowed
	}{
		{lifecycle.Pending, "", ""},
		{lifecycle.Pending, "Waiting", ""},
		{lifecycle.Pending, "ProvisioningFallback", ""},
		{lifecycle.Failed, "NodePoolTimeout", ""},
		{lifecycle.Failed, "Timeout", ""},
		{lifecycle.Failed, "", ""},
		{lifecycle.Running, "", ""},
		{lifecycle.Pending, "JobFailed", `reason: "JobFailed" is not a reason of a Pending job; allowed: Waiting, Next, WaitingForPool, Provisioning, ProvisioningFallback, Dispatching`},
		{lifecycle.Pending, "waiting", `"waiting" is not a reason of a Pending job`},
		{lifecycle.Failed, "Dispatching", `allowed: NodePoolTimeout, NodePoolFailed, JobSubmitFailed, JobFailed, Timeout`},
		{lifecycle.Failed, "RoleFailed", `"RoleFailed" is not a reason of a Failed job`},
		{lifecycle.Running, "Dispatching", `reason: must be empty for status Running, got "Dispatching"`},
		{lifecycle.Succeeded, "JobFailed", "must be empty for status Succeeded"},
		{lifecycle.Aborting, "SiblingFailed", "must be empty for status Aborting"},
		{lifecycle.Aborted, "Aborted", "must be empty for status Aborted"},
	}
	for _, tt := range tests {
		err := checkJobReason(tt.status, tt.reason)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s/%q: %v, want allowed", tt.status, tt.reason, err)
		case tt.err != "" && (errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s/%q: %v, want InvalidArgument containing %q", tt.status, tt.reason, err, tt.err)
		}
	}
}

// The internal methods' first line of defence: gateway.yaml gives them no
// HTTP route, so the OpenAPI document (generated from it) names none.
func TestInternalMethodsHaveNoHTTPRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(falconv1.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	routed := map[string]string{}
	for path, ops := range doc.Paths {
		for verb, op := range ops {
			routed[op.OperationID] = strings.ToUpper(verb) + " " + path
		}
	}
	for method, r := range rules {
		parts := strings.Split(strings.TrimPrefix(method, "/falcon.v1."), "/")
		id := parts[0] + "_" + parts[1]
		if route, ok := routed[id]; ok && r.callers == forControllers {
			t.Errorf("internal method %s has an HTTP route: %s", method, route)
		}
	}
	if len(routed) == 0 {
		t.Fatal("no operations in the OpenAPI document")
	}
}
