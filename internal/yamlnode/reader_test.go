package yamlnode_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/falconhq/falcon/internal/yamlnode"
)

func TestReader(t *testing.T) {
	var doc yaml.Node
	src := "s: text\nn: 7\nbig: 99\nquoted: \"7\"\nlist: [1]\nnull_s: ~\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0]
	val := func(key string) *yaml.Node {
		for i := 0; i < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		t.Fatalf("no %s", key)
		return nil
	}
	var r yamlnode.Reader
	if got := r.Str("s", val("s")); got != "text" {
		t.Errorf("Str = %q", got)
	}
	if got := r.Str("null_s", val("null_s")); got != "" {
		t.Errorf("Str(null) = %q", got)
	}
	if got := r.Integer("n", val("n"), 1, 10); got != 7 {
		t.Errorf("Integer = %d", got)
	}
	if len(r.Errs) != 0 {
		t.Fatalf("errors on good input: %v", r.Errs)
	}
	r.Integer("big", val("big"), 1, 10)
	r.Integer("quoted", val("quoted"), 1, 10)
	r.Str("list", val("list"))
	r.ExpectMapping("list", val("list"))
	want := []string{
		"big: must be an integer between 1 and 10, got 99 (line 3)",
		"quoted: must be an integer, got a string (line 4)",
		"list: must be a string, got a sequence (line 5)",
		"list: must be a mapping, got a sequence (line 5)",
	}
	if len(r.Errs) != len(want) {
		t.Fatalf("errors %v, want %d", r.Errs, len(want))
	}
	for i, w := range want {
		if got := r.Errs[i].Error(); !strings.HasPrefix(got, strings.SplitN(w, " got ", 2)[0]) || !strings.HasSuffix(got, w[strings.LastIndex(w, "("):]) {
			t.Errorf("error %d = %q, want %q", i, got, w)
		}
	}
}

func TestStringMap(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("m:\n  a: text\n  b: 8080\n  c: ~\n  d: [1]\nnone: ~\nlist: [1]\n"), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0]
	var r yamlnode.Reader
	lines := map[string]int{}
	got := r.StringMap("m", m.Content[1], "a string", yamlnode.AnyScalar, func(kpath string, k *yaml.Node) { lines[kpath] = k.Line })
	want := map[string]string{"a": "text", "b": "8080", "c": ""}
	if len(got) != len(want) || got["a"] != "text" || got["b"] != "8080" || got["c"] != "" {
		t.Errorf("StringMap = %v, want %v", got, want)
	}
	if lines["m.a"] != 2 || lines["m.d"] != 5 {
		t.Errorf("key lines %v", lines)
	}
	if len(r.Errs) != 1 || r.Errs[0].Error() != "m.d: must be a string, got a list (line 5)" {
		t.Errorf("errors %v", r.Errs)
	}
	if got := r.StringMap("none", m.Content[3], "a string", yamlnode.AnyScalar, nil); got != nil {
		t.Errorf("null = %v, want nil", got)
	}
	if got := r.StringMap("list", m.Content[5], "a string", yamlnode.AnyScalar, nil); got != nil || len(r.Errs) != 2 {
		t.Errorf("sequence = %v, errors %v", got, r.Errs)
	}
}
