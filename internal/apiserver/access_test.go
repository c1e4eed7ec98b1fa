package apiserver

import (
	"testing"

	"github.com/falconhq/falcon/internal/auth"
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
		ok     bool
	}{
		{"/falcon.v1.ExperimentService/CreateExp", user, true},
		{"/falcon.v1.ExperimentService/CreateExp", svc, true},
		{"/falcon.v1.ExperimentService/CreateExp", auth.Controller, false},
		{"/falcon.v1.ExperimentService/GetExp", auth.Controller, true},
		{"/falcon.v1.ExperimentService/UpdateExpStatus", user, false},
		{"/falcon.v1.ExperimentService/UpdateExpStatus", svc, false},
		{"/falcon.v1.ExperimentService/UpdateExpStatus", auth.Controller, true},
		{"/falcon.v1.JobService/WatchChanges", user, false},
		{"/falcon.v1.JobService/AbortJob", user, false},
		{"/falcon.v1.ClusterService/RegisterCluster", auth.Controller, true},
		{"/falcon.v1.ClusterService/RegisterCluster", user, true},
		{"/falcon.v1.ClusterService/ApplyClusters", auth.Controller, false},
		{"/falcon.v1.Unknown/Method", auth.Controller, false},
	}
	for _, tt := range tests {
		if err := authorize(tt.p, tt.method); (err == nil) != tt.ok {
			t.Errorf("authorize(%s, %s) = %v, want ok=%v", tt.p.Kind, tt.method, err, tt.ok)
		}
	}
}
