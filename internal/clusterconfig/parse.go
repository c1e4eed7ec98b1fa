package clusterconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
	"github.com/falconhq/falcon/internal/yamlnode"
)

// The keys a clusters file may hold, in the order error messages list them.
var (
	fileFields    = []string{"clusters", "selection"}
	clusterFields = []string{
		"provider", "project", "zone", "location", "cluster_id", "kubeconfig", "context",
		"accelerator_types", "default_namespace", "service_account", "gcs_bucket", "default_reservation",
		"max_queue_depth", "probe_timeout_s", "labels", "status", "xpk_path", "extra_args",
	}
	slotFields   = []string{"type", "device_class", "priority"}
	defaultPrio  = int32(1)
	fileToAPIKey = map[string]string{
		"provider": "backend", "zone": "location", "cluster_id": "gke_cluster", "context": "kube_context",
		"default_namespace": "namespace", "accelerator_types": "accelerators",
	}
)

// Option configures Parse.
type Option func(*parser)

// WithHomeDir sets the directory ~ stands for in kubeconfig paths (default:
// the current user's home).
func WithHomeDir(dir string) Option { return func(p *parser) { p.home = dir } }

// Registry is a whole clusters file: its clusters and the settings of the
// registry as a whole.
type Registry struct {
	// Clusters in the registry's stored form (see Normalize), by name.
	Clusters []*falconv1.Cluster
	// Selection is the policy that places jobs on them (queue.Policy's
	// names): "spread" when the file does not say, or "priority".
	Selection string
}

// ParseRegistry reads a clusters file. The error, if any, is an
// errdefs.FieldErrors holding every problem of the file; then nothing is
// returned, because applying part of a registry is worse than applying none.
func ParseRegistry(data []byte, opts ...Option) (*Registry, error) {
	r, err := parse(data, opts)
	if err != nil {
		return nil, err
	}
	if r.Selection == "" {
		r.Selection = string(queue.PolicySpread)
	}
	return r, nil
}

// parse is ParseRegistry leaving Selection "" when the file names none.
func parse(data []byte, opts []Option) (*Registry, error) {
	p := &parser{lines: map[string]int{}}
	for _, o := range opts {
		o(p)
	}
	root, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	out, sel := p.file(root)
	if err := p.Errs.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *falconv1.Cluster) int { return strings.Compare(a.GetName(), b.GetName()) })
	return &Registry{Clusters: out, Selection: sel}, nil
}

// Parse reads a clusters file's clusters (see ParseRegistry).
func Parse(data []byte, opts ...Option) ([]*falconv1.Cluster, error) {
	r, err := ParseRegistry(data, opts...)
	if err != nil {
		return nil, err
	}
	return r.Clusters, nil
}

// ParseOne reads a clusters file that holds exactly one cluster, as
// `falcon cluster create -f` takes.
func ParseOne(data []byte, opts ...Option) (*falconv1.Cluster, error) {
	r, err := parse(data, opts)
	if err != nil {
		return nil, err
	}
	cs := r.Clusters
	if r.Selection != "" {
		// create registers a cluster and leaves the registry's settings:
		// silently dropping the key would let the user believe it applied.
		return nil, errdefs.FieldErrors{{Field: "selection", Detail: "is a setting of the whole registry, which create does not change; set it with `falcon cluster apply -f`"}}
	}
	if len(cs) != 1 {
		return nil, errdefs.FieldErrors{{Field: "clusters", Detail: fmt.Sprintf(
			"holds %d clusters; create takes one (apply a whole registry with `falcon cluster apply -f`)", len(cs))}}
	}
	return cs[0], nil
}

// parseDocument returns the content of the single YAML document in data.
func parseDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errdefs.FieldErrors{{Field: "clusters", Detail: "is required: the file is empty"}}
		}
		return nil, errdefs.FieldErrors{{Field: "file", Detail: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, errdefs.FieldErrors{{Field: "file", Detail: fmt.Sprintf("holds more than one YAML document (the second starts at line %d); put every cluster under one clusters: mapping", next.Line)}}
	case !errors.Is(err, io.EOF):
		return nil, errdefs.FieldErrors{{Field: "file", Detail: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if len(doc.Content) == 0 || yamlnode.IsNull(doc.Content[0]) {
		return nil, errdefs.FieldErrors{{Field: "clusters", Detail: "is required: the file is empty"}}
	}
	return yamlnode.Resolve(doc.Content[0]), nil
}

// parser walks a YAML tree, collecting every error instead of stopping at the
// first, so one run reports all of a file's problems.
type parser struct {
	yamlnode.Reader
	home    string
	homeErr error
	// lines maps a path to the line of its key, to place the errors
	// Normalize finds.
	lines map[string]int
}

func (p *parser) file(n *yaml.Node) ([]*falconv1.Cluster, string) {
	if !p.ExpectMapping("file", n) {
		return nil, ""
	}
	var out []*falconv1.Cluster
	found := false
	sel := ""
	p.fields("", n, fileFields, func(k, path string, _, v *yaml.Node) {
		if k == "selection" {
			sel = p.selection(path, v)
			return
		}
		found = true
		switch {
		case yamlnode.IsNull(v):
			p.Fail(path, v, "is required: map each cluster name to its settings")
		case !p.ExpectMapping(path, v):
		case len(v.Content) == 0:
			p.Fail(path, v, "names no cluster; a registry needs at least one")
		default:
			p.fields(path, v, nil, func(name, cpath string, k, cv *yaml.Node) {
				if c := p.cluster(name, cpath, k, cv); c != nil {
					out = append(out, c)
				}
			})
		}
	})
	if !found {
		p.Fail("clusters", n, "is required: map each cluster name to its settings")
	}
	return out, sel
}

// selection reads the registry's selection policy, by queue.ParsePolicy's
// rule and in its words.
func (p *parser) selection(path string, v *yaml.Node) string {
	if yamlnode.IsNull(v) {
		p.Fail(path, v, "is empty; allowed values are spread (the default) and priority")
		return ""
	}
	s := p.Str(path, v)
	if v.Kind != yaml.ScalarNode {
		return ""
	}
	pol, err := NormalizeSelection(s)
	if err != nil {
		p.Fail(path, v, "%s", err.Detail)
		return ""
	}
	return pol
}

// NormalizeSelection checks a registry's selection policy as a request or
// a file gives it, returning its stored form ("" is spread); the error
// names the selection field and the allowed values.
func NormalizeSelection(s string) (string, *errdefs.FieldError) {
	pol, err := queue.ParsePolicy(s)
	if err != nil {
		return "", &errdefs.FieldError{Field: "selection", Detail: strings.TrimPrefix(err.Error(), "selection ")}
	}
	return string(pol), nil
}

// cluster decodes one cluster and runs the registry's rules on it, naming
// fields as the file does.
func (p *parser) cluster(name, path string, key, n *yaml.Node) *falconv1.Cluster {
	if !p.ExpectMapping(path, n) {
		return nil
	}
	errsBefore := len(p.Errs)
	c := &falconv1.Cluster{Name: name}
	p.lines[path] = key.Line
	wroteLocation := "" // "zone" or "location", whichever the file used
	p.fields(path, n, clusterFields, func(k, fpath string, kn, v *yaml.Node) {
		p.lines[fpath] = kn.Line
		switch k {
		case "provider":
			c.Backend = p.Str(fpath, v)
		case "project":
			c.Project = p.Str(fpath, v)
		case "zone", "location":
			if wroteLocation != "" {
				p.Fail(fpath, kn, "give zone or location, not both (%s is set above)", wroteLocation)
				return
			}
			wroteLocation = k
			c.Location = p.Str(fpath, v)
		case "cluster_id":
			c.GkeCluster = p.Str(fpath, v)
		case "kubeconfig":
			c.Kubeconfig = p.path(fpath, v)
		case "context":
			c.KubeContext = p.Str(fpath, v)
		case "accelerator_types":
			c.Accelerators = p.slots(fpath, v)
		case "default_namespace":
			c.Namespace = p.Str(fpath, v)
		case "service_account":
			c.ServiceAccount = p.Str(fpath, v)
		case "gcs_bucket":
			c.GcsBucket = p.Str(fpath, v)
		case "default_reservation":
			c.DefaultReservation = p.Str(fpath, v)
		case "max_queue_depth":
			c.MaxQueueDepth = int32(p.Integer(fpath, v, math.MinInt32, math.MaxInt32))
		case "probe_timeout_s":
			c.ProbeTimeoutS = int32(p.Integer(fpath, v, math.MinInt32, math.MaxInt32))
		case "xpk_path":
			c.XpkPath = p.path(fpath, v)
		case "extra_args":
			c.ExtraArgs = p.strings(fpath, v)
		case "labels":
			c.Labels = p.labels(fpath, v)
		case "status":
			c.Status = p.Str(fpath, v)
		}
	})
	// The registry's rules run even on a cluster with type errors, so one
	// pass reports everything; a rule's error on a field (or inside one)
	// that already has a type error would only repeat it, and is dropped.
	typeErrs := slices.Clone(p.Errs[errsBefore:])
	repeats := func(field string) bool {
		return slices.ContainsFunc(typeErrs, func(e *errdefs.FieldError) bool {
			return field == e.Field || strings.HasPrefix(field, e.Field+".") || strings.HasPrefix(field, e.Field+"[")
		})
	}
	names := map[string]string{"name": "", "location": "zone"}
	for f, api := range fileToAPIKey {
		names[api] = f
	}
	if wroteLocation != "" {
		names["location"] = wroteLocation
	}
	out, errs := normalize(c, vocabulary{prefix: path, names: names})
	for _, e := range errs {
		if repeats(e.Field) {
			continue
		}
		line, ok := p.lines[e.Field]
		if !ok {
			// A missing field: point at the cluster, or at the slot.
			line = p.lines[nearest(e.Field, p.lines)]
		}
		p.Errs = append(p.Errs, &errdefs.FieldError{Field: e.Field, Detail: fmt.Sprintf("%s (line %d)", e.Detail, line)})
	}
	if len(p.Errs) > errsBefore {
		return nil
	}
	return out
}

// nearest returns the longest prefix of path (cut at . or [) that has a line.
func nearest(path string, lines map[string]int) string {
	for p := path; p != ""; {
		if _, ok := lines[p]; ok {
			return p
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return path
}

// slots decodes accelerator_types.
func (p *parser) slots(path string, n *yaml.Node) []*falconv1.AcceleratorSlot {
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.Fail(path, n, "must be a list of {type, device_class, priority}, got %s", yamlnode.Describe(n))
		return nil
	}
	out := make([]*falconv1.AcceleratorSlot, 0, len(n.Content))
	for i, item := range n.Content {
		item = yamlnode.Resolve(item)
		ipath := fmt.Sprintf("%s[%d]", path, i)
		p.lines[ipath] = item.Line
		// Every item gets a slot, so indices stay those of the file.
		s := &falconv1.AcceleratorSlot{Priority: defaultPrio}
		out = append(out, s)
		if !p.ExpectMapping(ipath, item) {
			continue
		}
		hasType := false
		p.fields(ipath, item, slotFields, func(k, fpath string, kn, v *yaml.Node) {
			p.lines[fpath] = kn.Line
			switch k {
			case "type":
				s.Type, hasType = p.Str(fpath, v), true
			case "device_class":
				s.DeviceClass = p.Str(fpath, v)
			case "priority":
				s.Priority = int32(p.Integer(fpath, v, math.MinInt32, math.MaxInt32))
			}
		})
		if !hasType {
			p.Fail(ipath+".type", item, "is required")
		}
	}
	return out
}

// path reads a file path, expanding a leading ~ to the home directory.
func (p *parser) path(fpath string, n *yaml.Node) string {
	s := p.Str(fpath, n)
	if s != "~" && !strings.HasPrefix(s, "~/") {
		return s
	}
	if p.home == "" && p.homeErr == nil {
		p.home, p.homeErr = os.UserHomeDir()
	}
	if p.homeErr != nil {
		p.Fail(fpath, n, "cannot expand ~: %v; write the absolute path", p.homeErr)
		return ""
	}
	return filepath.Join(p.home, strings.TrimPrefix(s, "~"))
}

// fields walks mapping n with yamlnode.Fields, reporting through p.Fail.
func (p *parser) fields(path string, n *yaml.Node, allowed []string, fn func(key, path string, k, v *yaml.Node)) {
	yamlnode.Fields(path, n, allowed, p.Fail, fn)
}

// strings reads a list of strings, such as extra_args.
func (p *parser) strings(path string, n *yaml.Node) []string {
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.Fail(path, n, "must be a list of strings, got %s", yamlnode.Describe(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		p.lines[ipath] = item.Line
		out = append(out, p.Str(ipath, yamlnode.Resolve(item)))
	}
	return out
}

// labels reads a mapping of strings. Values YAML reads as numbers or
// booleans (tier: 1) are kept as written.
func (p *parser) labels(path string, n *yaml.Node) map[string]string {
	return p.StringMap(path, n, "a string", yamlnode.AnyScalar, func(kpath string, k *yaml.Node) { p.lines[kpath] = k.Line })
}
