package yamlnode

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestFields(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		allowed []string
		keys    string // keys passed to fn, in order
		errs    string // problems reported, in order
	}{
		{"allowed keys", "a: 1\nb: 2\n", []string{"a", "b"}, "top.a,top.b", ""},
		{"any key", "x: 1\ny: 2\n", nil, "top.x,top.y", ""},
		{"unknown key", "a: 1\nzz: 2\n", []string{"a"}, "top.a", "top.zz@2: unknown field; allowed: a"},
		{"duplicate key", "a: 1\na: 2\n", nil, "top.a", "top.a@2: duplicate key (first at line 1)"},
		{"merge key", "base: &b {x: 1}\nm:\n  <<: *b\n", nil, "top.base,top.m", ""},
		{"non-string key", "? [1, 2]\n: v\n", nil, "", "top.?@1: keys must be strings, got a list"},
		{"a misspelt key is named", "replicas: 1\n", []string{"replica", "image"}, "", "top.replicas@1: unknown field; did you mean replica? allowed: replica, image"},
		{"empty key is named quoted", "\"\": 1\n", []string{"a"}, "", `top.""@1: unknown field; allowed: a`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var root yaml.Node
			if err := yaml.Unmarshal([]byte(tt.doc), &root); err != nil {
				t.Fatal(err)
			}
			var keys, errs []string
			fail := func(path string, at *yaml.Node, format string, args ...any) {
				errs = append(errs, fmt.Sprintf("%s@%d: %s", path, at.Line, fmt.Sprintf(format, args...)))
			}
			Fields("top", root.Content[0], tt.allowed, fail, func(_, path string, _, _ *yaml.Node) { keys = append(keys, path) })
			if got := strings.Join(keys, ","); got != tt.keys {
				t.Errorf("keys = %q, want %q", got, tt.keys)
			}
			if got := strings.Join(errs, ";"); got != tt.errs {
				t.Errorf("errors = %q, want %q", got, tt.errs)
			}
		})
	}
	// A merge key inside a mapping is refused.
	var root yaml.Node
	_ = yaml.Unmarshal([]byte("<<: {x: 1}\n"), &root)
	var errs []string
	Fields("top", root.Content[0], nil, func(path string, _ *yaml.Node, format string, args ...any) {
		errs = append(errs, path+": "+fmt.Sprintf(format, args...))
	}, func(string, string, *yaml.Node, *yaml.Node) {})
	if len(errs) != 1 || !strings.Contains(errs[0], "merge keys are not supported") {
		t.Fatalf("merge key: %v", errs)
	}
}

func TestDescribeAndJoin(t *testing.T) {
	var n yaml.Node
	_ = yaml.Unmarshal([]byte(`"two"`), &n)
	if got := Describe(n.Content[0]); got != `"two"` {
		t.Errorf("Describe = %s", got)
	}
	if Join("", "a") != "a" || Join("a", "b") != "a.b" {
		t.Error("Join")
	}
	if !IsNull(nil) {
		t.Error("IsNull(nil)")
	}
}

func TestNearest(t *testing.T) {
	names := []string{"command", "replica", "image", "device_count", "device_type", "device_topo", "envs", "ttl", "idle_ttl"}
	tests := []struct{ key, want string }{
		{"comand", "command"},
		{"commmand", "command"},
		{"replicas", "replica"},
		{"imgae", "image"},             // two letters swapped
		{"device-type", "device_type"}, // a dash for the underscore
		{"Device_Topo", "device_topo"},
		{"env", "envs"},
		{"tl", ""}, // one edit from ttl, but half of what was typed
		{"idle-ttl", "idle_ttl"},
		{"topology", ""}, // another word, not a slip
		{"accelerator", ""},
	}
	for _, tt := range tests {
		if got := Nearest(tt.key, names); got != tt.want {
			t.Errorf("Nearest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
