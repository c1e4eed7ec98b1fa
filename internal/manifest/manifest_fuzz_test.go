package manifest_test

import (
	"errors"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/manifest"
	"github.com/falconhq/falcon/internal/validation"
)

// FuzzParse feeds arbitrary bytes to Parse and ParseTasks. `go test` replays
// the seed corpus in testdata/fuzz/FuzzParse (the repository's examples, the
// table tests' inputs and edge cases); `make fuzz` explores from it.
//
// Beyond not panicking, it holds the parser to what its callers rely on:
//   - a refusal is an errdefs.FieldErrors of InvalidArgument, every entry
//     naming a field and saying what is wrong on which line, so the CLI can
//     print it and exit 2;
//   - the same input gives the same answer (errors in the same order), so a
//     user fixing a file sees a stable list;
//   - an accepted manifest written back out and parsed again is the same
//     experiment: nothing the parser keeps depends on how it was spelled;
//   - a config given as a mapping or list becomes YAML text that decodes to
//     the same value, since the job reads it back from CUSTOM_CONFIG_KEY;
//   - what validation then says about an accepted manifest names fields by
//     the manifest's own paths.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: a\nrole_to_task_spec:\n  w: {command: x, replica: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		exp, err := manifest.Parse(data)
		if err != nil {
			if exp != nil {
				t.Fatalf("Parse returned an experiment and the error %v", err)
			}
			checkFieldErrors(t, err, "manifest")
			if _, again := manifest.Parse(data); again == nil || again.Error() != err.Error() {
				t.Fatalf("Parse is not deterministic:\nfirst  %v\nsecond %v", err, again)
			}
		} else {
			again, err := manifest.Parse(toManifest(t, exp))
			if err != nil {
				t.Fatalf("the accepted manifest, written back out, is refused: %v\nwritten:\n%s", err, toManifest(t, exp))
			}
			if diff := cmp.Diff(exp, again, protocmp.Transform()); diff != "" {
				t.Fatalf("written back out and parsed again, the manifest changed (-first +second):\n%s", diff)
			}
			checkConfig(t, data, exp.GetConfig())
			if verr := validation.Experiment(exp, nil, nil); verr != nil {
				checkFieldErrors(t, verr, "")
				var fes errdefs.FieldErrors
				errors.As(verr, &fes)
				for _, fe := range fes {
					if root := fieldRoot(fe.Field); !validRoots[root] {
						t.Errorf("validation error %q is not under a manifest field", fe)
					}
				}
			}
		}

		roles, err := manifest.ParseTasks(data)
		if err != nil {
			if roles != nil {
				t.Fatalf("ParseTasks returned roles and the error %v", err)
			}
			checkFieldErrors(t, err, "role_to_task_spec")
			return
		}
		written := toManifest(t, &falconv1.Experiment{RoleToTaskSpec: roles})
		again, err := manifest.Parse(written)
		if err != nil {
			t.Fatalf("the accepted tasks file, written as a manifest, is refused: %v\nwritten:\n%s", err, written)
		}
		if diff := cmp.Diff(roles, again.GetRoleToTaskSpec(), protocmp.Transform()); diff != "" {
			t.Fatalf("the tasks file read as a manifest's roles changed (-tasks +manifest):\n%s", diff)
		}
	})
}

// validRoots are the first segments of the paths validation may name for a
// manifest's experiment: its keys (timeout_seconds is copied into roles).
var validRoots = map[string]bool{
	"name": true, "exp_type": true, "cluster_name": true, "priority": true, "tags": true,
	"config": true, "role_to_task_spec": true,
}

func fieldRoot(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

var lineSuffix = regexp.MustCompile(`\(line ([0-9]+)\)$`)

// checkFieldErrors holds err to the contract of Falcon's strict readers:
// errdefs.FieldErrors of InvalidArgument, each with a field and a detail,
// and a line number of at least 1, except the errors about the document as
// a whole (field doc) that no single line holds. doc "" skips the line check
// (validation's errors are about values, not lines).
func checkFieldErrors(t *testing.T, err error, doc string) {
	t.Helper()
	var fes errdefs.FieldErrors
	if !errors.As(err, &fes) || len(fes) == 0 {
		t.Fatalf("error %v (%T) is not a non-empty errdefs.FieldErrors", err, err)
	}
	if c := errdefs.Code(err); c != codes.InvalidArgument {
		t.Fatalf("error %v maps to %v, want InvalidArgument", err, c)
	}
	for _, fe := range fes {
		if fe == nil || strings.TrimSpace(fe.Field) == "" || strings.TrimSpace(fe.Detail) == "" {
			t.Fatalf("field error %#v does not name a field and say what is wrong (in %v)", fe, err)
		}
		if doc == "" || fe.Field == doc {
			continue
		}
		m := lineSuffix.FindStringSubmatch(fe.Detail)
		if m == nil {
			t.Fatalf("field error %q does not end with its line", fe)
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 {
			t.Fatalf("field error %q points at line %d", fe, n)
		}
	}
}

// checkConfig: when the manifest's config was a mapping or a list, the text
// Parse made of it must decode to the same value, or the job would read a
// config other than the one its user wrote.
func checkConfig(t *testing.T, data []byte, config string) {
	t.Helper()
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "config" {
			continue
		}
		n := resolve(root.Content[i+1])
		if n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode {
			return
		}
		var want, got any
		if err := n.Decode(&want); err != nil {
			return // not a plain value (e.g. a key that is a mapping); nothing to compare
		}
		if err := yaml.Unmarshal([]byte(config), &got); err != nil {
			t.Fatalf("config written as %s became text that is not YAML: %v\ntext:\n%s", describeKind(n), err, config)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("config became text of another value:\nwritten %#v\nstored  %#v\ntext:\n%s", want, got, config)
		}
		return
	}
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func describeKind(n *yaml.Node) string {
	if n.Kind == yaml.SequenceNode {
		return "a list"
	}
	return "a mapping"
}

// toManifest writes exp as a manifest. Every string is double-quoted, the
// one YAML style that can spell any string exactly, so a difference after
// parsing again is the parser's and never this writer's choice of style.
func toManifest(t *testing.T, exp *falconv1.Experiment) []byte {
	t.Helper()
	top := mapping(
		"name", str(exp.GetName()),
		"exp_type", str(exp.GetExpType()),
		"cluster_name", str(exp.GetClusterName()),
		"priority", integer(exp.GetPriority()),
		"tags", strList(exp.GetTags()),
		"config", str(exp.GetConfig()),
	)
	roles := mapping()
	for _, role := range sortedKeys(exp.GetRoleToTaskSpec()) {
		ts := exp.GetRoleToTaskSpec()[role]
		spec := mapping(
			"command", str(ts.GetCommand()),
			"replica", integer(ts.GetReplica()),
			"image", str(ts.GetImage()),
			"device_count", integer(ts.GetDeviceCount()),
			"device_type", str(ts.GetDeviceType()),
			"device_topo", str(ts.GetDeviceTopo()),
			"envs", strMap(ts.GetEnvs()),
			"timeout_seconds", integer(ts.GetTimeoutSeconds()),
			"supply_mode", str(ts.GetSupplyMode()),
		)
		// Resources is a message: absent and empty differ, so an absent one
		// is not written.
		if r := ts.GetResources(); r != nil {
			res := mapping()
			if r.GetRequests() != nil {
				res.Content = append(res.Content, str("requests"), strMap(r.GetRequests()))
			}
			if r.GetLimits() != nil {
				res.Content = append(res.Content, str("limits"), strMap(r.GetLimits()))
			}
			spec.Content = append(spec.Content, str("resources"), res)
		}
		roles.Content = append(roles.Content, str(role), spec)
	}
	if exp.GetRoleToTaskSpec() != nil {
		top.Content = append(top.Content, str("role_to_task_spec"), roles)
	}
	out, err := yaml.Marshal(top)
	if err != nil {
		t.Fatalf("writing the manifest: %v", err)
	}
	return out
}

func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
}

func integer(v int32) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(int(v))}
}

func mapping(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, str(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}

func strList(xs []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, x := range xs {
		n.Content = append(n.Content, str(x))
	}
	return n
}

func strMap(m map[string]string) *yaml.Node {
	n := mapping()
	for _, k := range sortedKeys(m) {
		n.Content = append(n.Content, str(k), str(m[k]))
	}
	return n
}

// sortedKeys orders a map's keys, so a failure prints the same manifest
// every time.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
