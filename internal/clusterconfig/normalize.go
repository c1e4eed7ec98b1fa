package clusterconfig

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/yamlnode"
)

// Backends Falcon can drive.
const (
	// BackendLocal runs jobs as processes on the controller's machine.
	BackendLocal = "local"
	// BackendKubernetes reaches any conformant cluster through a kubeconfig
	// context.
	BackendKubernetes = "kubernetes"
	// BackendGKE finds a GKE cluster's endpoint through the GKE API.
	BackendGKE = "gke"
	// BackendXpk runs jobs through the xpk CLI on a GKE cluster (design
	// 001's XpkWorkloadManager).
	BackendXpk = "xpk"
)

// Backends lists the backends, in the order messages show them.
var Backends = []string{BackendLocal, BackendKubernetes, BackendGKE, BackendXpk}

// Probed reports whether clusters of this backend are probed: those whose
// jobs run somewhere that can fail to answer. A local cluster's jobs are
// the controller's own processes.
func Probed(backend string) bool {
	return backend == BackendXpk || backend == BackendKubernetes || backend == BackendGKE
}

// DeviceClasses are the values of an accelerator slot's device_class: which
// xpk flag names the type (--tpu-type or --device-type).
var DeviceClasses = []string{string(accelerator.KindTPU), string(accelerator.KindGPU)}

// Probe timeouts, in seconds: what probe_timeout_s 0 means, and the most
// it may be (a probe that takes longer than a few minutes says the cluster
// is unusable anyway, and would hold the probe round that long).
const (
	DefaultProbeTimeoutS = 15
	MaxProbeTimeoutS     = 300
)

// XpkFlags are the flags Falcon sets on `xpk workload create` (see package
// xpk); extra_args may not set them again, since argparse would let the
// later one win silently, or fail the command (--env-file is exclusive with
// --env, which Falcon always sets).
var XpkFlags = []string{
	"--cluster", "--project", "--zone", "--workload", "--docker-image", "--command",
	"--tpu-type", "--device-type", "--priority", "--namespace", "--env", "--env-file",
	"--num-slices", "--num-nodes",
}

// Statuses lists the cluster statuses. Only an active cluster receives new
// jobs; maintenance and offline keep what they run.
var Statuses = []string{store.ClusterActive, store.ClusterMaintenance, store.ClusterOffline}

// MaxNameLen is the longest cluster name: a DNS-1123 label, because the name
// ends up in Kubernetes object names and labels.
const MaxNameLen = 63

var (
	dnsLabel        = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	bucketName      = regexp.MustCompile(`^[a-z0-9][-a-z0-9_.]{1,220}[a-z0-9]$`)
	labelKey        = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`)
	labelValue      = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	maxLabelLen     = 63
	maxSubdomainLen = 253
)

// Normalize checks a cluster registration against the registry's rules and
// returns it in the form the registry stores. Problems are field errors
// whose paths are the API's field names (kube_context,
// accelerators[1].priority); callers prefix them (cluster., clusters[2].).
// On error the returned cluster is nil.
//
// The stored form: accelerator types by their canonical names, slots sorted
// by priority then type, accelerator_types derived from them; gcs_bucket
// without gs://; status active when unset. Id and created_at are kept as
// given: they are the server's to set.
func Normalize(in *falconv1.Cluster) (*falconv1.Cluster, errdefs.FieldErrors) {
	return normalize(in, vocabulary{})
}

// vocabulary names fields the way the user wrote them: the API's names, or a
// file's keys (provider for backend) under the cluster's path.
type vocabulary struct {
	prefix string            // prepended to every path
	names  map[string]string // API field name -> name shown; "" for the prefix itself
}

// name is how messages refer to an API field.
func (v vocabulary) name(field string) string {
	if n, ok := v.names[field]; ok {
		return n
	}
	return field
}

// at is the path of an API field.
func (v vocabulary) at(field string) string {
	if n := v.name(field); n != "" {
		return yamlnode.Join(v.prefix, n)
	}
	return v.prefix
}

// normalize is Normalize in the caller's vocabulary.
func normalize(in *falconv1.Cluster, v vocabulary) (*falconv1.Cluster, errdefs.FieldErrors) {
	var errs errdefs.FieldErrors
	c := &falconv1.Cluster{}
	if in != nil {
		c = proto.Clone(in).(*falconv1.Cluster)
	}
	backendIs := func(b string) string { return v.name("backend") + " " + b }

	switch n := c.GetName(); {
	case n == "":
		errs.Add(v.at("name"), "is required")
	case len(n) > MaxNameLen || !dnsLabel.MatchString(n):
		errs.Add(v.at("name"), "%q must be a DNS-1123 label: at most %d lower-case letters, digits and '-', starting and ending with a letter or digit", n, MaxNameLen)
	}

	// Which connection fields each backend needs, and which it would ignore:
	// an ignored field is an error, since whoever wrote it expected an effect.
	required := map[string][]string{
		BackendGKE:        {"project", "location", "gke_cluster"},
		BackendXpk:        {"project", "location", "gke_cluster"},
		BackendKubernetes: {"kube_context"},
	}
	owners := map[string][]string{
		"kubeconfig": {BackendKubernetes}, "kube_context": {BackendKubernetes}, "gke_cluster": {BackendGKE, BackendXpk},
		"xpk_path": {BackendXpk}, "extra_args": {BackendXpk},
	}
	values := map[string]string{
		"project": c.GetProject(), "location": c.GetLocation(), "gke_cluster": c.GetGkeCluster(),
		"kubeconfig": c.GetKubeconfig(), "kube_context": c.GetKubeContext(), "xpk_path": c.GetXpkPath(),
		"extra_args": strings.Join(c.GetExtraArgs(), " "),
	}
	switch b := c.GetBackend(); {
	case b == "":
		errs.Add(v.at("backend"), "is required; one of %s", strings.Join(Backends, ", "))
	case !slices.Contains(Backends, b):
		errs.Add(v.at("backend"), "%q is not a backend; one of %s", b, strings.Join(Backends, ", "))
	default:
		for _, f := range required[b] {
			if values[f] == "" {
				errs.Add(v.at(f), "is required for %s", backendIs(b))
			}
		}
		for _, f := range []string{"kubeconfig", "kube_context", "gke_cluster", "xpk_path", "extra_args"} {
			if own := owners[f]; (values[f] != "" || (f == "extra_args" && len(c.GetExtraArgs()) > 0)) && !slices.Contains(own, b) {
				errs.Add(v.at(f), "is only for %s, not %s", backendIs(strings.Join(own, " or ")), b)
			}
		}
	}
	if p := c.GetXpkPath(); p != "" && !filepath.IsAbs(p) && strings.ContainsRune(p, filepath.Separator) {
		errs.Add(v.at("xpk_path"), "%q must be an absolute path on the controller's machine, or a command name found on its PATH", p)
	}
	for i, a := range c.GetExtraArgs() {
		if msg := extraArgProblem(a); msg != "" {
			errs.Add(fmt.Sprintf("%s[%d]", v.at("extra_args"), i), "%s", msg)
		}
	}
	if k := c.GetKubeconfig(); k != "" && !filepath.IsAbs(k) {
		errs.Add(v.at("kubeconfig"), "%q must be an absolute path on the controller's machine", k)
	}
	if ns := c.GetNamespace(); ns != "" && (len(ns) > MaxNameLen || !dnsLabel.MatchString(ns)) {
		errs.Add(v.at("namespace"), "%q must be a DNS-1123 label (a Kubernetes namespace name)", ns)
	}
	if sa := c.GetServiceAccount(); sa != "" && (len(sa) > maxSubdomainLen || !dnsSubdomain.MatchString(sa)) {
		errs.Add(v.at("service_account"), "%q must be a DNS-1123 subdomain (a Kubernetes service account name): at most %d lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", sa, maxSubdomainLen)
	}

	if b := c.GetGcsBucket(); b != "" {
		bare := strings.TrimSuffix(strings.TrimPrefix(b, "gs://"), "/")
		switch {
		case strings.Contains(bare, "/"):
			errs.Add(v.at("gcs_bucket"), "%q must be a bucket (name or gs://name), not a path inside one", b)
		case !bucketName.MatchString(bare):
			errs.Add(v.at("gcs_bucket"), "%q is not a GCS bucket name: 3-222 lower-case letters, digits, '-', '_' and '.', starting and ending with a letter or digit", b)
		default:
			c.GcsBucket = bare
		}
	}

	switch st := c.GetStatus(); {
	case st == "":
		c.Status = store.ClusterActive
	case !slices.Contains(Statuses, st):
		errs.Add(v.at("status"), "%q is not a cluster status; allowed: %s", st, strings.Join(Statuses, ", "))
	}
	if d := c.GetMaxQueueDepth(); d < 0 {
		errs.Add(v.at("max_queue_depth"), "must be 0 (no limit) or positive, got %d", d)
	}

	c.Accelerators = normalizeSlots(&errs, c, v)
	c.AcceleratorTypes = AcceleratorTypes(c.Accelerators)
	if c.GetBackend() == BackendXpk {
		for i, s := range c.GetAccelerators() {
			if spec, err := accelerator.Lookup(s.GetType()); err == nil && spec.Kind == accelerator.KindCPU {
				errs.Add(fmt.Sprintf("%s[%d].type", v.at("accelerators"), i), "%s is not an accelerator; an xpk cluster offers TPU and GPU types", s.GetType())
			}
		}
	}

	keys := make([]string, 0, len(c.GetLabels()))
	for k := range c.GetLabels() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		// Keys named as the file's reader names them, so the error finds
		// its line.
		field := v.at("labels") + "." + yamlnode.Key(k)
		if len(k) > maxLabelLen || !labelKey.MatchString(k) {
			errs.Add(field, "key must be at most %d letters, digits and '-_./', starting and ending with a letter or digit", maxLabelLen)
		}
		if val := c.GetLabels()[k]; len(val) > maxLabelLen || !labelValue.MatchString(val) {
			errs.Add(field, "value %q must be empty or at most %d letters, digits and '-_.', starting and ending with a letter or digit", val, maxLabelLen)
		}
	}

	if t := c.GetProbeTimeoutS(); t < 0 || t > MaxProbeTimeoutS {
		errs.Add(v.at("probe_timeout_s"), "must be 0 (the default) or positive, at most %d, got %d", MaxProbeTimeoutS, t)
	}

	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// extraArgProblem says why an extra argument of xpk workload create is
// refused: it sets, or abbreviates (argparse accepts any unambiguous
// prefix), a flag Falcon sets itself.
func extraArgProblem(a string) string {
	if strings.TrimSpace(a) == "" {
		return "is empty; remove it"
	}
	name, _, _ := strings.Cut(a, "=")
	if !strings.HasPrefix(name, "--") || len(name) < 3 {
		return ""
	}
	for _, f := range XpkFlags {
		switch {
		case name == f:
			return fmt.Sprintf("%q sets %s, which Falcon sets itself; remove it (flags Falcon sets: %s)", a, f, strings.Join(XpkFlags, ", "))
		case strings.HasPrefix(f, name):
			return fmt.Sprintf("%q abbreviates %s, which Falcon sets itself (xpk takes an unambiguous prefix for the flag); remove it", a, f)
		}
	}
	return ""
}

// CheckXpkPath reports, on the machine running it, whether the cluster's
// xpk executable exists: a registration naming one that does not is
// refused when it is applied, rather than failing every job later. An empty
// xpk_path (xpk on PATH) is left to the cluster's probe, which reports it.
// The field is named as the API names it; callers prefix it.
func CheckXpkPath(c *falconv1.Cluster, lookPath func(string) (string, error)) errdefs.FieldErrors {
	var errs errdefs.FieldErrors
	p := c.GetXpkPath()
	if c.GetBackend() != BackendXpk || p == "" {
		return nil
	}
	if _, err := lookPath(p); err != nil {
		errs.Add("xpk_path", "%q cannot be run on this machine: %v; install xpk (pip install xpk) or correct the path", p, err)
	}
	return errs
}

// normalizeSlots checks the accelerator slots and returns them canonical and
// sorted. A request that gives only accelerator_types (the older form, most
// preferred first) gets slots of priority 1, 2, ... in that order; one that
// gives both must agree, since accelerator_types is derived.
func normalizeSlots(errs *errdefs.FieldErrors, c *falconv1.Cluster, v vocabulary) []*falconv1.AcceleratorSlot {
	in := c.GetAccelerators()
	path := v.at("accelerators")
	if len(in) == 0 && len(c.GetAcceleratorTypes()) > 0 {
		path = v.at("accelerator_types")
		for i, t := range c.GetAcceleratorTypes() {
			in = append(in, &falconv1.AcceleratorSlot{Type: t, Priority: int32(i + 1)})
		}
	}
	out := make([]*falconv1.AcceleratorSlot, 0, len(in))
	seen := map[string]int{}
	for i, s := range in {
		p := fmt.Sprintf("%s[%d]", path, i)
		typ, err := CanonicalType(s.GetType())
		switch {
		case s.GetType() == "":
			errs.Add(p+".type", "is required")
		case err != nil:
			errs.Add(p+".type", "%s", err)
		default:
			if j, dup := seen[typ]; dup {
				errs.Add(p+".type", "%s is listed twice (also %s[%d]); give each type once", typ, path, j)
				continue
			}
			seen[typ] = i
		}
		if s.GetPriority() < 1 {
			errs.Add(p+".priority", "must be at least 1 (1 is the most preferred), got %d", s.GetPriority())
		}
		out = append(out, &falconv1.AcceleratorSlot{Type: typ, Priority: s.GetPriority(), DeviceClass: s.GetDeviceClass()})
	}
	// device_class is a cross-check of the type (and, on xpk clusters, the
	// flag that names it), so it must agree with the type's kind.
	for i, s := range in {
		class := s.GetDeviceClass()
		if class == "" {
			continue
		}
		p := fmt.Sprintf("%s[%d].device_class", path, i)
		if !slices.Contains(DeviceClasses, class) {
			errs.Add(p, "%q is not a device class; one of %s", class, strings.Join(DeviceClasses, ", "))
			continue
		}
		spec, err := accelerator.Lookup(s.GetType())
		if err != nil || s.GetType() == "" {
			continue // the type's own error says it
		}
		if class != string(spec.Kind) {
			errs.Add(p, "is %s, but %s is a %s type", class, spec.Name, spec.Kind)
		}
	}
	slices.SortStableFunc(out, func(a, b *falconv1.AcceleratorSlot) int {
		return cmp.Or(cmp.Compare(a.GetPriority(), b.GetPriority()), cmp.Compare(a.GetType(), b.GetType()))
	})
	if len(c.GetAccelerators()) > 0 && len(c.GetAcceleratorTypes()) > 0 && len(*errs) == 0 {
		if derived := AcceleratorTypes(out); !slices.Equal(derived, c.GetAcceleratorTypes()) {
			errs.Add(v.at("accelerator_types"), "is derived from %s (%s); leave it empty", v.name("accelerators"), strings.Join(derived, ", "))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// CanonicalType returns the canonical name of an accelerator type (v7x for
// tpu7x), or an error saying which types exist.
func CanonicalType(t string) (string, error) {
	spec, err := accelerator.Lookup(t)
	if err != nil {
		var fe *errdefs.FieldError
		if errors.As(err, &fe) {
			return "", errors.New(fe.Detail)
		}
		return "", err
	}
	return spec.Name, nil
}

// AcceleratorTypes derives a cluster's accelerator_types from its slots:
// the types, most preferred (lowest priority, then name) first.
func AcceleratorTypes(slots []*falconv1.AcceleratorSlot) []string {
	sorted := slices.Clone(slots)
	slices.SortStableFunc(sorted, func(a, b *falconv1.AcceleratorSlot) int {
		return cmp.Or(cmp.Compare(a.GetPriority(), b.GetPriority()), cmp.Compare(a.GetType(), b.GetType()))
	})
	var out []string
	for _, s := range sorted {
		out = append(out, s.GetType())
	}
	return out
}
