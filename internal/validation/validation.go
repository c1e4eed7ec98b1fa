package validation

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/runmetrics"
)

// Limits. They are generous for real use and small enough that one request
// cannot hurt the database or the controllers.
const (
	MaxConfigBytes = 1 << 20 // 1 MiB
	// MaxCommandBytes: every backend runs the command as one argument of
	// /bin/sh -c, which Linux bounds with its NUL (MAX_ARG_STRLEN); a longer
	// one could be stored but never run.
	MaxCommandBytes = placement.MaxArgStrlen - 1
	MaxRoles        = 16
	MaxReplica      = 1024
	// MaxSlices bounds a multi-slice task: each slice is a node pool of
	// its own, created and held together.
	MaxSlices  = 64
	MaxTags    = 32
	MaxEnvs    = 256
	MaxNameLen = 63
)

// SupplyModes are the allowed task supply modes; empty lets Falcon choose.
var SupplyModes = []string{"", "reservation", "flex-start"}

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	topology     = regexp.MustCompile(`^[1-9][0-9]*x[1-9][0-9]*(x[1-9][0-9]*)?$`)
	envName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	tagPattern   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.:=/]*[A-Za-z0-9])?$`)
)

// ResourceNames are the resources a task may request and limit. Accelerators
// (google.com/tpu, nvidia.com/gpu) are not among them: device_type and
// device_count decide those, so the two can never disagree.
var ResourceNames = []string{"cpu", "memory", "ephemeral-storage"}

// ReservedEnvs are set by Falcon for every process; a task may not set them.
var ReservedEnvs = []string{
	"FALCON_EXP_ID", "FALCON_JOB_ID", "FALCON_ROLE", "FALCON_RANK", "FALCON_WORLD_SIZE",
	"FALCON_ARTIFACT_DIR", "ARTIFACT_LOCAL_DIR", "CUSTOM_CONFIG_KEY",
}

// MultisliceEnvs are set by Falcon on every host of a multi-slice task,
// which may then not set them itself.
var MultisliceEnvs = []string{
	"MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_PORT", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID",
}

// Experiment checks a create request. knownCluster reports whether a cluster
// name is registered (nil skips the check); clusters lists the registered
// names for the error message.
func Experiment(e *falconv1.Experiment, knownCluster func(string) bool, clusters []string) error {
	var errs errdefs.FieldErrors
	if e == nil {
		errs.Add("experiment", "is required")
		return errs.Err()
	}
	label(&errs, "name", e.GetName(), true)
	if e.GetExpType() != "" {
		label(&errs, "exp_type", e.GetExpType(), false)
	}
	if c := e.GetClusterName(); c != "" && knownCluster != nil && !knownCluster(c) {
		errs.Add("cluster_name", "unknown cluster %q; registered clusters: %s", c, orNone(clusters))
	}
	if len(e.GetTags()) > MaxTags {
		errs.Add("tags", "at most %d tags, got %d", MaxTags, len(e.GetTags()))
	}
	for i, t := range e.GetTags() {
		if len(t) > MaxNameLen || !tagPattern.MatchString(t) {
			errs.Add(fmt.Sprintf("tags[%d]", i), "%q must be 1-%d characters of letters, digits and -_.:=/ starting and ending with a letter or digit", t, MaxNameLen)
		}
	}
	if n := len(e.GetConfig()); n > MaxConfigBytes {
		errs.Add("config", "is %d bytes, the limit is %d (1 MiB); put large data in artifacts and reference it from the config", n, MaxConfigBytes)
	}
	roles := e.GetRoleToTaskSpec()
	switch {
	case len(roles) == 0:
		errs.Add("role_to_task_spec", "is required: map each role name (e.g. worker) to a task spec with at least a command")
	case len(roles) > MaxRoles:
		errs.Add("role_to_task_spec", "at most %d roles, got %d", MaxRoles, len(roles))
	}
	names := make([]string, 0, len(roles))
	for r := range roles {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		task(&errs, "role_to_task_spec."+r, r, roles[r], e.GetInteractive())
	}
	ttlFields(&errs, e)
	if ms := e.GetMetrics(); len(ms) > 0 {
		specs := make([]runmetrics.Spec, len(ms))
		for i, m := range ms {
			specs[i] = runmetrics.Spec{Name: m.GetName(), Pattern: m.GetPattern(), Better: m.GetBetter()}
		}
		// A pattern that does not compile would only fail once the job
		// runs, with nobody watching: refused here, by field.
		if _, err := runmetrics.Compile(specs); err != nil {
			var fe errdefs.FieldErrors
			if errors.As(err, &fe) {
				errs = append(errs, fe...)
			} else {
				errs.Add("metrics", "%v", err)
			}
		}
	}
	return errs.Err()
}

// missingReplica says what a task without replica must set: for a TPU
// slice, the hosts its topology needs.
func missingReplica(t *falconv1.TaskSpec) string {
	if spec, err := accelerator.Lookup(t.GetDeviceType()); err == nil && spec.Kind == accelerator.KindTPU {
		_, err := spec.Slice(t.GetDeviceTopo(), 0, 0)
		var fes errdefs.FieldErrors
		if errors.As(err, &fes) {
			for _, e := range fes {
				if e.Field == "replica" {
					return e.Detail
				}
			}
		}
	}
	return fmt.Sprintf("is required: the number of hosts in the slice, 1 to %d", MaxReplica)
}

func task(errs *errdefs.FieldErrors, path, role string, t *falconv1.TaskSpec, interactive bool) {
	if !dns1123Label.MatchString(role) || len(role) > MaxNameLen {
		errs.Add(path, "role name %q must be a DNS-1123 label: at most %d lower-case letters, digits and '-', starting and ending with a letter or digit", role, MaxNameLen)
	}
	if t == nil {
		errs.Add(path, "task spec is required")
		return
	}
	before := len(*errs)
	switch {
	case strings.TrimSpace(t.GetCommand()) == "" && !interactive:
		errs.Add(path+".command", "is required and must not be empty (or set interactive: true to hold the slice for exec)")
	case len(t.GetCommand()) > MaxCommandBytes:
		errs.Add(path+".command", "is %d bytes, the limit is %d: every backend runs it as one argument of /bin/sh -c, and Linux limits one argument to %d bytes with its terminating NUL (MAX_ARG_STRLEN); put a longer script in the image or the artifact dir and run it from there",
			len(t.GetCommand()), MaxCommandBytes, placement.MaxArgStrlen)
	}
	switch r := t.GetReplica(); {
	case r == 0: // missing, as far as the API can tell
		errs.Add(path+".replica", "%s", missingReplica(t))
	case r < 1 || r > MaxReplica:
		errs.Add(path+".replica", "must be between 1 and %d (hosts in the slice), got %d", MaxReplica, r)
	}
	if t.GetTimeoutSeconds() < 0 {
		errs.Add(path+".timeout_seconds", "must be 0 (no limit) or positive, got %d", t.GetTimeoutSeconds())
	}
	if t.GetDeviceCount() < 0 {
		errs.Add(path+".device_count", "must not be negative, got %d", t.GetDeviceCount())
	}
	if topo := t.GetDeviceTopo(); topo != "" && !topology.MatchString(topo) {
		errs.Add(path+".device_topo", "%q must be NxM or NxMxK with positive integers (e.g. 2x2x4)", topo)
	}
	if n := len(*errs); n == before {
		// The slice must be consistent in itself: a topology fixes the host
		// count and the devices per host, whatever cluster runs it. A task
		// naming no device type is a CPU task and is resolved too: the
		// Kubernetes renderer and the GKE node pools resolve every task, so
		// a device_count without a device_type would otherwise be accepted
		// here and fail only at dispatch. (Found by FuzzExperiment.)
		_, err := accelerator.Resolve(t.GetDeviceType(), t.GetDeviceTopo(), int(t.GetReplica()), int(t.GetDeviceCount()))
		var fes errdefs.FieldErrors
		var fe *errdefs.FieldError
		switch {
		case errors.As(err, &fes):
			for _, e := range fes {
				errs.Add(path+"."+e.Field, "%s", e.Detail)
			}
		case errors.As(err, &fe):
			errs.Add(path+"."+fe.Field, "%s", fe.Detail)
		case err != nil:
			errs.Add(path, "%v", err)
		}
	}
	switch n := t.GetSlices(); {
	case n < 0 || n > MaxSlices:
		errs.Add(path+".slices", "must be between 1 and %d (slices of device_topo run together), got %d", MaxSlices, n)
	case n > 1:
		if spec, err := accelerator.Lookup(t.GetDeviceType()); err != nil || spec.Kind != accelerator.KindTPU {
			errs.Add(path+".slices", "%d slices need a TPU device_type (JAX multislice joins TPU slices); a %s task runs on one set of hosts: raise replica instead",
				n, kindName(t.GetDeviceType()))
		} else if total := int(n) * int(t.GetReplica()); total > MaxReplica {
			errs.Add(path+".slices", "%d slices of %d hosts are %d hosts; at most %d in one task", n, t.GetReplica(), total, MaxReplica)
		}
	}
	if !slices.Contains(SupplyModes, t.GetSupplyMode()) {
		errs.Add(path+".supply_mode", "%q is not allowed; use reservation or flex-start, or leave it empty", t.GetSupplyMode())
	}
	if len(t.GetEnvs()) > MaxEnvs {
		errs.Add(path+".envs", "at most %d variables, got %d", MaxEnvs, len(t.GetEnvs()))
	}
	keys := make([]string, 0, len(t.GetEnvs()))
	for k := range t.GetEnvs() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case !envName.MatchString(k):
			errs.Add(path+".envs."+k, "is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
		case slices.Contains(ReservedEnvs, k):
			errs.Add(path+".envs."+k, "is set by Falcon and cannot be overridden; reserved: %s", strings.Join(ReservedEnvs, ", "))
		case t.GetSlices() > 1 && slices.Contains(MultisliceEnvs, k):
			errs.Add(path+".envs."+k, "is set by Falcon on every host of a multi-slice task (slices: %d); reserved there: %s", t.GetSlices(), strings.Join(MultisliceEnvs, ", "))
		}
	}
	resources(errs, path+".resources", t.GetResources())
}

// ParseResources checks a task's resources and returns its requests and
// limits parsed, keyed by resource name. Problems are errdefs.FieldErrors
// under path (role_to_task_spec.prep.resources, or just resources for a
// caller holding the task spec alone). It is exported so that the Kubernetes
// renderer, which must not trust a stored task blindly, applies exactly the
// rules CreateExp applied.
func ParseResources(path string, r *falconv1.Resources) (requests, limits map[string]resource.Quantity, err error) {
	var errs errdefs.FieldErrors
	requests, limits = resources(&errs, path, r)
	if err := errs.Err(); err != nil {
		return nil, nil, err
	}
	return requests, limits, nil
}

func resources(errs *errdefs.FieldErrors, path string, r *falconv1.Resources) (requests, limits map[string]resource.Quantity) {
	requests = quantities(errs, path+".requests", r.GetRequests())
	limits = quantities(errs, path+".limits", r.GetLimits())
	for _, name := range ResourceNames {
		req, hasReq := requests[name]
		lim, hasLim := limits[name]
		if hasReq && hasLim && lim.Cmp(req) < 0 {
			// Kubernetes refuses such a pod; saying so here names the field
			// instead of failing the job at dispatch.
			errs.Add(path+".limits."+name, "%s is less than the request %s; a limit must be at least its request",
				r.GetLimits()[name], r.GetRequests()[name])
		}
	}
	return requests, limits
}

func quantities(errs *errdefs.FieldErrors, path string, m map[string]string) map[string]resource.Quantity {
	if len(m) == 0 {
		return nil
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(map[string]resource.Quantity, len(m))
	for _, name := range names {
		v, field := m[name], path+"."+name
		if !slices.Contains(ResourceNames, name) {
			errs.Add(field, "unknown resource %q; allowed: %s (accelerators come from device_type and device_count)", name, strings.Join(ResourceNames, ", "))
			continue
		}
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil:
			errs.Add(field, "%q is not a Kubernetes quantity (e.g. %s)", v, quantityExample(name))
		case q.Sign() <= 0:
			errs.Add(field, "must be positive, got %s", v)
		default:
			out[name] = q
		}
	}
	return out
}

func quantityExample(name string) string {
	if name == "cpu" {
		return "2 or 500m"
	}
	return "4Gi or 512Mi"
}

func label(errs *errdefs.FieldErrors, field, v string, required bool) {
	switch {
	case v == "" && required:
		errs.Add(field, "is required")
	case len(v) > MaxNameLen || !dns1123Label.MatchString(v):
		errs.Add(field, "%q must be a DNS-1123 label: at most %d lower-case letters, digits and '-', starting and ending with a letter or digit", v, MaxNameLen)
	}
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return strings.Join(xs, ", ")
}

// Status checks that s is one of allowed, naming field and the allowed values.
func Status(field, s string, allowed []string) error {
	if slices.Contains(allowed, s) {
		return nil
	}
	return errdefs.Invalid(field, "%s is not a status; allowed: %s", strconv.Quote(s), strings.Join(allowed, ", "))
}

// ttlFields checks ttl, idle_ttl and interactive. The server's cap on a
// ttl (--max-ttl) is the API server's to apply; this is what holds
// everywhere.
func ttlFields(errs *errdefs.FieldErrors, e *falconv1.Experiment) {
	for _, f := range []struct {
		name string
		d    interface {
			CheckValid() error
			AsDuration() time.Duration
		}
		set bool
	}{{"ttl", e.GetTtl(), e.Ttl != nil}, {"idle_ttl", e.GetIdleTtl(), e.IdleTtl != nil}} {
		if !f.set {
			continue
		}
		if err := f.d.CheckValid(); err != nil || f.d.AsDuration() <= 0 {
			errs.Add(f.name, "must be a positive duration such as 2h or 30m, got %s", f.d.AsDuration())
		}
	}
	if e.GetInteractive() && e.Ttl == nil {
		errs.Add("ttl", "is required with interactive: true, so that no slice is held and forgotten; e.g. ttl: 2h (falcon exp extend adds time)")
	}
}

// kindName says what kind of task a device type makes, for messages.
func kindName(deviceType string) string {
	if deviceType == "" {
		return "CPU"
	}
	if spec, err := accelerator.Lookup(deviceType); err == nil {
		return strings.ToUpper(string(spec.Kind))
	}
	return fmt.Sprintf("%q", deviceType)
}
