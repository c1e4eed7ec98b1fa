package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/yamlnode"
)

// The keys a manifest may hold, in the order error messages list them.
var (
	experimentFields = []string{"name", "exp_type", "cluster_name", "priority", "tags", "config", "role_to_task_spec", "timeout_seconds", "metrics", "ttl", "idle_ttl", "interactive"}
	metricFields     = []string{"name", "pattern", "better"}
	taskSpecFields   = []string{"command", "replica", "image", "device_count", "device_type", "device_topo", "envs", "timeout_seconds", "supply_mode", "resources", "slices"}
	resourcesFields  = []string{"requests", "limits"}
)

// Parse reads an experiment manifest. The returned error, if any, is an
// errdefs.FieldErrors holding every problem found.
func Parse(data []byte) (*falconv1.Experiment, error) {
	root, err := parseDocument(data, "manifest")
	if err != nil {
		return nil, err
	}
	d := &decoder{}
	exp := d.experiment(root)
	if err := d.Errs.Err(); err != nil {
		return nil, err
	}
	return exp, nil
}

// ParseTasks reads the tasks file of the flag form (--role-to-task-spec): a
// mapping from role name to task spec. Errors name the path the field would
// have in a manifest (role_to_task_spec.<role>.<field>) so they read the same
// as the server's.
func ParseTasks(data []byte) (map[string]*falconv1.TaskSpec, error) {
	root, err := parseDocument(data, "role_to_task_spec")
	if err != nil {
		return nil, err
	}
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k := root.Content[i]; k.Value == "role_to_task_spec" {
				return nil, errdefs.FieldErrors{{Field: "role_to_task_spec", Detail: fmt.Sprintf(
					"the tasks file holds a whole manifest (role_to_task_spec at line %d); pass it with -f instead", k.Line)}}
			}
		}
	}
	d := &decoder{}
	roles := d.roles("role_to_task_spec", root, 0, false)
	if err := d.Errs.Err(); err != nil {
		return nil, err
	}
	return roles, nil
}

// parseDocument returns the content of the single YAML document in data.
func parseDocument(data []byte, what string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errdefs.FieldErrors{{Field: what, Detail: "is empty"}}
		}
		return nil, errdefs.FieldErrors{{Field: what, Detail: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, errdefs.FieldErrors{{Field: what, Detail: fmt.Sprintf("holds more than one YAML document (the second starts at line %d); write one per file", next.Line)}}
	case !errors.Is(err, io.EOF):
		return nil, errdefs.FieldErrors{{Field: what, Detail: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	if len(doc.Content) == 0 || yamlnode.IsNull(doc.Content[0]) {
		return nil, errdefs.FieldErrors{{Field: what, Detail: "is empty"}}
	}
	return yamlnode.Resolve(doc.Content[0]), nil
}

// decoder walks a YAML tree, collecting every error instead of stopping at
// the first, so one run of the CLI reports all of a manifest's problems.
type decoder struct {
	yamlnode.Reader
}

func (d *decoder) experiment(n *yaml.Node) *falconv1.Experiment {
	exp := &falconv1.Experiment{}
	if !d.ExpectMapping("manifest", n) {
		return exp
	}
	var (
		defaultTimeout int32
		roleNodes      *yaml.Node
		roleKeyPath    string
	)
	d.fields("", n, experimentFields, func(key string, path string, v *yaml.Node) {
		switch key {
		case "name":
			exp.Name = d.Str(path, v)
		case "exp_type":
			exp.ExpType = d.Str(path, v)
		case "cluster_name":
			exp.ClusterName = d.Str(path, v)
		case "priority":
			exp.Priority = d.int32(path, v)
		case "tags":
			exp.Tags = d.strList(path, v)
		case "config":
			exp.Config = d.config(path, v)
		case "role_to_task_spec":
			roleNodes, roleKeyPath = v, path
		case "metrics":
			exp.Metrics = d.metrics(path, v)
		case "ttl":
			if t, ok := d.Duration(path, v); ok {
				exp.Ttl = durationpb.New(t)
			}
		case "idle_ttl":
			if t, ok := d.Duration(path, v); ok {
				exp.IdleTtl = durationpb.New(t)
			}
		case "interactive":
			exp.Interactive = d.Bool(path, v)
		case "timeout_seconds":
			// Checked here, where the user wrote it: copied into every
			// role, a bad value would be reported once per role under a
			// path the user never wrote.
			if t := d.int32(path, v); t < 0 {
				d.Fail(path, v, "must be 0 (no limit) or positive, got %d", t)
			} else {
				defaultTimeout = t
			}
		}
	})
	// Roles are decoded last so the top-level timeout is known wherever it
	// appears in the file.
	if roleNodes != nil {
		exp.RoleToTaskSpec = d.roles(roleKeyPath, roleNodes, defaultTimeout, true)
	}
	return exp
}

// roles decodes role name -> task spec. Roles without their own
// timeout_seconds get defaultTimeout.
func (d *decoder) roles(path string, n *yaml.Node, defaultTimeout int32, allowNull bool) map[string]*falconv1.TaskSpec {
	if allowNull && yamlnode.IsNull(n) {
		return nil
	}
	if !d.ExpectMapping(path, n) {
		return nil
	}
	roles := map[string]*falconv1.TaskSpec{}
	d.fields(path, n, nil, func(role string, rpath string, v *yaml.Node) {
		roles[role] = d.taskSpec(rpath, v, defaultTimeout)
	})
	return roles
}

func (d *decoder) taskSpec(path string, n *yaml.Node, defaultTimeout int32) *falconv1.TaskSpec {
	spec := &falconv1.TaskSpec{}
	if !d.ExpectMapping(path, n) {
		return spec
	}
	hasTimeout := false
	d.fields(path, n, taskSpecFields, func(key string, fpath string, v *yaml.Node) {
		switch key {
		case "command":
			spec.Command = d.Str(fpath, v)
		case "replica":
			spec.Replica = d.int32(fpath, v)
		case "image":
			spec.Image = d.Str(fpath, v)
		case "device_count":
			spec.DeviceCount = d.int32(fpath, v)
		case "device_type":
			spec.DeviceType = d.Str(fpath, v)
		case "device_topo":
			spec.DeviceTopo = d.Str(fpath, v)
		case "envs":
			spec.Envs = d.envs(fpath, v)
		case "timeout_seconds":
			spec.TimeoutSeconds = d.int32(fpath, v)
			hasTimeout = true
		case "supply_mode":
			spec.SupplyMode = d.Str(fpath, v)
		case "resources":
			spec.Resources = d.resources(fpath, v)
		case "slices":
			spec.Slices = d.int32(fpath, v)
		}
	})
	if !hasTimeout {
		spec.TimeoutSeconds = defaultTimeout
	}
	return spec
}

// fields walks mapping n with yamlnode.Fields, reporting through d.Fail.
func (d *decoder) fields(path string, n *yaml.Node, allowed []string, fn func(key, path string, v *yaml.Node)) {
	yamlnode.Fields(path, n, allowed, d.Fail, func(key, kpath string, _, v *yaml.Node) { fn(key, kpath, v) })
}

func (d *decoder) int32(path string, n *yaml.Node) int32 {
	return int32(d.Integer(path, n, math.MinInt32, math.MaxInt32))
}

// metrics reads the list of log patterns; what a pattern may be is
// validation's to say (runmetrics.Compile), here only its shape.
func (d *decoder) metrics(path string, n *yaml.Node) []*falconv1.MetricSpec {
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.Fail(path, n, "must be a list of {name, pattern, better}, got %s", yamlnode.Describe(n))
		return nil
	}
	out := make([]*falconv1.MetricSpec, 0, len(n.Content))
	for i, item := range n.Content {
		item = yamlnode.Resolve(item)
		ipath := fmt.Sprintf("%s[%d]", path, i)
		m := &falconv1.MetricSpec{}
		if !d.ExpectMapping(ipath, item) {
			continue
		}
		d.fields(ipath, item, metricFields, func(key, fpath string, v *yaml.Node) {
			switch key {
			case "name":
				m.Name = d.Str(fpath, v)
			case "pattern":
				m.Pattern = d.Str(fpath, v)
			case "better":
				m.Better = d.Str(fpath, v)
			}
		})
		out = append(out, m)
	}
	return out
}

func (d *decoder) strList(path string, n *yaml.Node) []string {
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.Fail(path, n, "must be a list of strings, got %s", yamlnode.Describe(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = yamlnode.Resolve(item)
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.ScalarNode || yamlnode.IsNull(item) {
			d.Fail(ipath, item, "must be a string, got %s", yamlnode.Describe(item))
			continue
		}
		out = append(out, item.Value)
	}
	return out
}

// envs reads a mapping of environment variables. Values that YAML reads as
// numbers or booleans (PORT: 8080, DEBUG: true) are kept as written, since an
// environment holds only strings anyway.
func (d *decoder) envs(path string, n *yaml.Node) map[string]string {
	return d.StringMap(path, n, "a string, number or boolean", yamlnode.AnyScalar, nil)
}

// resources reads a task's requests and limits.
func (d *decoder) resources(path string, n *yaml.Node) *falconv1.Resources {
	if yamlnode.IsNull(n) {
		return nil
	}
	if !d.ExpectMapping(path, n) {
		return nil
	}
	res := &falconv1.Resources{}
	d.fields(path, n, resourcesFields, func(key, kpath string, v *yaml.Node) {
		switch key {
		case "requests":
			res.Requests = d.quantities(kpath, v)
		case "limits":
			res.Limits = d.quantities(kpath, v)
		}
	})
	return res
}

// quantities reads a mapping of resource names to quantities. A quantity may
// be a YAML number (cpu: 2, cpu: 0.5) as well as a string (memory: 4Gi),
// since users write CPUs as numbers; either is kept as written, because
// whether the names and quantities are valid is the server's validation, the
// same for every client. Booleans and nulls are refused here: `cpu: yes` or a
// forgotten value is never a quantity.
func (d *decoder) quantities(path string, n *yaml.Node) map[string]string {
	return d.StringMap(path, n, "a quantity such as 2, 500m or 4Gi", func(v *yaml.Node) (string, bool) {
		if v.Kind == yaml.ScalarNode {
			switch v.ShortTag() {
			case "!!str", "!!int", "!!float":
				return v.Value, true
			}
		}
		return "", false
	}, nil)
}

// config reads the opaque config. A string is kept verbatim; a mapping or
// list, which users write when their config is YAML anyway, is turned back
// into YAML text, since the API (and the job reading CUSTOM_CONFIG_KEY) sees a
// string.
func (d *decoder) config(path string, n *yaml.Node) string {
	switch {
	case yamlnode.IsNull(n):
		return ""
	case n.Kind == yaml.ScalarNode:
		return n.Value
	}
	if a := outsideAlias(n, map[*yaml.Node]bool{}); a != nil {
		// The text would hold *name without its &name, which no YAML
		// reader accepts: the job would get a config it cannot read.
		// (Found by FuzzParse.)
		d.Fail(path, a, "uses the anchor &%s defined outside config; config is stored as text, where that anchor does not exist: define it inside config or write the value out", a.Value)
		return ""
	}
	spellNulls(n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		d.Fail(path, n, "cannot be re-serialised as YAML: %v", err)
		return ""
	}
	_ = enc.Close()
	return buf.String()
}

// outsideAlias returns the first alias under n whose anchor is not defined
// under n before it (in document order, as YAML requires), recording the
// anchors it passes in defined. Aliases are not followed, so this visits
// each node once.
func outsideAlias(n *yaml.Node, defined map[*yaml.Node]bool) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		if !defined[n.Alias] {
			return n
		}
		return nil
	}
	if n.Anchor != "" {
		defined[n] = true
	}
	for _, c := range n.Content {
		if a := outsideAlias(c, defined); a != nil {
			return a
		}
	}
	return nil
}

// spellNulls writes the value of every null left empty (checkpoint:) as
// null. The YAML encoder writes an empty null as two single quotes (the
// empty string), so the job would read "" where its user wrote no value.
// (Found by FuzzParse.)
func spellNulls(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && n.Value == "" {
		n.Value = "null"
	}
	for _, c := range n.Content {
		spellNulls(c)
	}
}
