package validation_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/validation"
)

// FuzzExperiment builds an experiment of one role from the fuzzer's values
// and validates it. `go test` replays the seed corpus in
// testdata/fuzz/FuzzExperiment (the examples' experiments, the table tests'
// cases and edge values); `make fuzz` explores from it.
//
// The values are the fields whose rules are not trivial (names, topology and
// device arithmetic, env names, Kubernetes quantities), so the fuzzer spends
// its time there rather than on wire encoding. Beyond not panicking:
//   - a refusal is an errdefs.FieldErrors of InvalidArgument, every entry
//     on a path the manifest has (role_to_task_spec.<role>.<field>) with a
//     detail, in the same order every time;
//   - the experiment is not modified;
//   - name, role name and cluster_name are refused exactly when an
//     independent reading of the rule says so;
//   - the resources' errors are exactly ParseResources', since the
//     Kubernetes renderer re-checks stored tasks with it and must agree;
//   - an accepted task resolves to a slice (accelerator.Resolve), as the
//     Kubernetes renderer and the GKE node-pool code require at dispatch:
//     what CreateExp accepts must never fail there for a reason it could
//     have said at once.
func FuzzExperiment(f *testing.F) {
	f.Add("hello", "benchmark", "", "example", "model: qwen", "main", "echo hi", int32(1), "", "", int32(0), int32(600), "", "LOG_LEVEL", "info", "cpu", "2", "4")
	f.Fuzz(func(t *testing.T, name, expType, cluster, tag, config, role, command string, replica int32,
		deviceType, deviceTopo string, deviceCount, timeout int32, supplyMode, envKey, envValue, resName, request, limit string) {
		task := &falconv1.TaskSpec{
			Command: command, Replica: replica, DeviceType: deviceType, DeviceTopo: deviceTopo,
			DeviceCount: deviceCount, TimeoutSeconds: timeout, SupplyMode: supplyMode,
		}
		if envKey != "" {
			task.Envs = map[string]string{envKey: envValue}
		}
		if resName != "" {
			task.Resources = &falconv1.Resources{}
			if request != "" {
				task.Resources.Requests = map[string]string{resName: request}
			}
			if limit != "" {
				task.Resources.Limits = map[string]string{resName: limit}
			}
		}
		exp := &falconv1.Experiment{
			Name: name, ExpType: expType, ClusterName: cluster, Config: config,
			RoleToTaskSpec: map[string]*falconv1.TaskSpec{role: task},
		}
		if tag != "" {
			exp.Tags = []string{tag}
		}
		before := proto.Clone(exp)
		known := func(c string) bool { return c == "local" }

		err := validation.Experiment(exp, known, []string{"local"})
		if !proto.Equal(before, exp) {
			t.Fatalf("validation modified the experiment: %v", cmp.Diff(before, exp))
		}
		if again := validation.Experiment(exp, known, []string{"local"}); errString(again) != errString(err) {
			t.Fatalf("validation is not deterministic:\nfirst  %v\nsecond %v", err, again)
		}

		rolePath := "role_to_task_spec." + role
		fields := map[string]bool{}
		if err != nil {
			var fes errdefs.FieldErrors
			if !errors.As(err, &fes) || len(fes) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty errdefs.FieldErrors", err, err)
			}
			if c := errdefs.Code(err); c != codes.InvalidArgument {
				t.Fatalf("error %v maps to %v, want InvalidArgument", err, c)
			}
			for _, fe := range fes {
				if strings.TrimSpace(fe.Detail) == "" || !knownPath(fe.Field, rolePath) {
					t.Fatalf("field error %q is not on a manifest path with a detail (role path %q)", fe, rolePath)
				}
				fields[fe.Field] = true
			}
		}

		if got, want := fields["name"], !isLabel(name); got != want {
			t.Errorf("name %q: refused %v, want %v (%v)", name, got, want, err)
		}
		if got, want := fields[rolePath], !isLabel(role); got != want {
			t.Errorf("role %q: refused %v, want %v (%v)", role, got, want, err)
		}
		if got, want := fields["cluster_name"], cluster != "" && cluster != "local"; got != want {
			t.Errorf("cluster_name %q: refused %v, want %v (%v)", cluster, got, want, err)
		}

		var resErrs []string
		if err != nil {
			for _, fe := range err.(errdefs.FieldErrors) {
				if strings.HasPrefix(fe.Field, rolePath+".resources.") {
					resErrs = append(resErrs, fe.Error())
				}
			}
		}
		requests, limits, perr := validation.ParseResources(rolePath+".resources", task.GetResources())
		var parseErrs []string
		if perr != nil {
			for _, fe := range perr.(errdefs.FieldErrors) {
				parseErrs = append(parseErrs, fe.Error())
			}
		}
		if diff := cmp.Diff(parseErrs, resErrs); diff != "" {
			t.Fatalf("ParseResources and Experiment disagree on the resources (-ParseResources +Experiment):\n%s", diff)
		}

		if err != nil {
			return
		}
		if _, rerr := accelerator.Resolve(deviceType, deviceTopo, int(replica), int(deviceCount)); rerr != nil {
			t.Fatalf("the task was accepted, but dispatch would refuse it: %v", rerr)
		}
		for res, lim := range limits {
			if req, ok := requests[res]; ok && lim.Cmp(req) < 0 {
				t.Fatalf("accepted %s limit %s below its request %s", res, lim.String(), req.String())
			}
		}
		for res, q := range requests {
			if q.Sign() <= 0 {
				t.Fatalf("accepted %s request %s, not positive", res, q.String())
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// knownPath reports whether field is a path an experiment of one role at
// rolePath can have an error on.
func knownPath(field, rolePath string) bool {
	switch field {
	case "name", "exp_type", "cluster_name", "tags", "tags[0]", "config", "role_to_task_spec", rolePath:
		return true
	}
	rest, ok := strings.CutPrefix(field, rolePath+".")
	if !ok {
		return false
	}
	switch rest {
	case "command", "replica", "timeout_seconds", "device_count", "device_type", "device_topo", "supply_mode", "envs":
		return true
	}
	for _, p := range []string{"envs.", "resources.requests.", "resources.limits."} {
		if strings.HasPrefix(rest, p) && len(rest) > len(p) {
			return true
		}
	}
	return false
}

// isLabel is the DNS-1123 label rule written out by hand, independently of
// the regular expression validation uses: 1-63 of a-z, 0-9 and '-', not
// starting or ending with '-'.
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
