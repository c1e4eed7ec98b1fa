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
