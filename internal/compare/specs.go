package compare

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// MaxExperiments bounds one comparison: a table wider than this is read by
// nobody.
const MaxExperiments = 10

// Row is one key and its value in each experiment; Present[i] is false
// where experiment i has no such key.
type Row struct {
	Key     string   `json:"key"`
	Values  []string `json:"values"`
	Present []bool   `json:"present"`
	Differs bool     `json:"differs"`
}

// SpecDiff is the result of Specs: one column per experiment, one row per
// key, in a stable order (fields, then config keys, then roles).
type SpecDiff struct {
	Experiments []string `json:"experiments"`
	// ConfigMode is "keys" when every config parsed as a YAML or JSON
	// mapping, "lines" otherwise.
	ConfigMode string `json:"config_mode"`
	Rows       []Row  `json:"rows"`
}

// Specs compares experiments' fields, configs and role specs. With all,
// every row is kept; otherwise only those that differ.
func Specs(exps []*falconv1.Experiment, all bool) *SpecDiff {
	d := &SpecDiff{ConfigMode: "keys"}
	flat := make([]map[string]string, len(exps))
	configs := make([]map[string]string, len(exps))
	for i, e := range exps {
		d.Experiments = append(d.Experiments, e.GetId())
		flat[i] = specFields(e)
		if m, ok := configKeys(e.GetConfig()); ok {
			configs[i] = m
		} else {
			d.ConfigMode = "lines"
		}
	}
	if d.ConfigMode == "lines" {
		for i, e := range exps {
			configs[i] = configLines(e.GetConfig())
		}
	}
	sep := "."
	if d.ConfigMode == "lines" {
		sep = "" // config[line 3]
	}
	for i := range exps {
		for k, v := range configs[i] {
			flat[i]["config"+sep+k] = v
		}
	}
	keys := map[string]bool{}
	for _, m := range flat {
		for k := range m {
			keys[k] = true
		}
	}
	ordered := make([]string, 0, len(keys))
	for k := range keys {
		ordered = append(ordered, k)
	}
	sort.Slice(ordered, func(a, b int) bool { return keyLess(ordered[a], ordered[b]) })
	for _, k := range ordered {
		r := Row{Key: k, Values: make([]string, len(exps)), Present: make([]bool, len(exps))}
		for i, m := range flat {
			r.Values[i], r.Present[i] = m[k]
		}
		for i := 1; i < len(exps); i++ {
			if r.Values[i] != r.Values[0] || r.Present[i] != r.Present[0] {
				r.Differs = true
			}
		}
		if r.Differs || all {
			d.Rows = append(d.Rows, r)
		}
	}
	return d
}

// section orders keys: the experiment's own fields, its config, its roles.
func section(k string) int {
	switch {
	case strings.HasPrefix(k, "config"):
		return 1
	case strings.HasPrefix(k, "role."):
		return 2
	}
	return 0
}

// keyLess sorts by section, then by key with list indices compared as
// numbers, so layers[10] follows layers[9] and config line 10 line 9.
func keyLess(a, b string) bool {
	if sa, sb := section(a), section(b); sa != sb {
		return sa < sb
	}
	return natLess(a, b)
}

func natLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// specFields flattens what an experiment asked for, besides its config.
func specFields(e *falconv1.Experiment) map[string]string {
	m := map[string]string{
		"exp_type": e.GetExpType(),
		"cluster":  e.GetClusterName(),
		"priority": strconv.Itoa(int(e.GetPriority())),
		"tags":     strings.Join(e.GetTags(), ", "),
	}
	if e.Ttl != nil {
		m["ttl"] = e.GetTtl().AsDuration().String()
	}
	if e.GetInteractive() {
		m["interactive"] = "true"
	}
	for role, t := range e.GetRoleToTaskSpec() {
		p := "role." + role + "."
		m[p+"command"] = t.GetCommand()
		m[p+"image"] = t.GetImage()
		m[p+"replica"] = strconv.Itoa(int(t.GetReplica()))
		m[p+"device_type"] = t.GetDeviceType()
		m[p+"device_topo"] = t.GetDeviceTopo()
		m[p+"device_count"] = strconv.Itoa(int(t.GetDeviceCount()))
		m[p+"timeout_seconds"] = strconv.Itoa(int(t.GetTimeoutSeconds()))
		if t.GetSupplyMode() != "" {
			m[p+"supply_mode"] = t.GetSupplyMode()
		}
		for k, v := range t.GetEnvs() {
			m[p+"envs."+k] = v
		}
		for k, v := range t.GetResources().GetRequests() {
			m[p+"resources.requests."+k] = v
		}
		for k, v := range t.GetResources().GetLimits() {
			m[p+"resources.limits."+k] = v
		}
	}
	return m
}

// configKeys flattens a config that parses as a YAML (or JSON, which is
// YAML) mapping to key paths: optimizer.lr, layers[3].remat. An empty
// config is an empty mapping.
func configKeys(config string) (map[string]string, bool) {
	out := map[string]string{}
	if strings.TrimSpace(config) == "" {
		return out, true
	}
	var v any
	if err := yaml.Unmarshal([]byte(config), &v); err != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	flatten("", m, out)
	return out, true
}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[prefix] = "{}"
			return
		}
		for k, c := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, c, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = "[]"
			return
		}
		for i, c := range x {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), c, out)
		}
	case nil:
		out[prefix] = "null"
	case string:
		out[prefix] = x
	default:
		b, err := json.Marshal(x)
		if err != nil {
			out[prefix] = fmt.Sprint(x)
			return
		}
		out[prefix] = string(b)
	}
}

// configLines keys a config that is not a mapping by line number.
func configLines(config string) map[string]string {
	out := map[string]string{}
	if config == "" {
		return out
	}
	lines := strings.Split(strings.TrimSuffix(config, "\n"), "\n")
	for i, l := range lines {
		out[fmt.Sprintf("[line %d]", i+1)] = l
	}
	return out
}

// CheckIDs refuses what cannot be compared: fewer than two experiments,
// more than MaxExperiments, or one named twice.
func CheckIDs(ids []string) error {
	switch {
	case len(ids) < 2:
		return fmt.Errorf("give at least two experiments to compare, got %d", len(ids))
	case len(ids) > MaxExperiments:
		return fmt.Errorf("at most %d experiments fit one comparison, got %d", MaxExperiments, len(ids))
	}
	for i, id := range ids {
		if j := slices.Index(ids, id); j != i {
			return fmt.Errorf("experiment %s is given twice (arguments %d and %d): compare it with another", id, j+1, i+1)
		}
	}
	return nil
}
