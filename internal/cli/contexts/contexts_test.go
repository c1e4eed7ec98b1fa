package contexts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconhq/falcon/internal/errdefs"
)

func TestResolve(t *testing.T) {
	const fallback = "http://127.0.0.1:7070"
	file := `current-context: prod
contexts:
  prod: {server: https://falcon.example.com}
  lab: {server: http://lab:7070}
  empty: {}
`
	tests := []struct {
		name    string
		choice  Choice
		env     map[string]string
		file    string // "" : no file
		want    string
		wantErr string // substring; the error must be invalid input
	}{
		{name: "nothing anywhere is falcon dev", want: fallback},
		{name: "no current-context is falcon dev", file: "contexts:\n  lab: {server: http://lab:7070}\n", want: fallback},
		{name: "current-context", file: file, want: "https://falcon.example.com"},
		{name: "--server beats everything", file: file, choice: Choice{Server: "http://x", Context: "lab"}, env: map[string]string{ServerEnv: "http://y"}, want: "http://x"},
		{name: "--context beats FALCON_SERVER", file: file, choice: Choice{Context: "lab"}, env: map[string]string{ServerEnv: "http://y"}, want: "http://lab:7070"},
		{name: "FALCON_SERVER beats FALCON_CONTEXT", file: file, env: map[string]string{ServerEnv: "http://y", ContextEnv: "lab"}, want: "http://y"},
		{name: "FALCON_CONTEXT beats current-context", file: file, env: map[string]string{ContextEnv: "lab"}, want: "http://lab:7070"},
		{name: "unknown --context", file: file, choice: Choice{Context: "nope"}, wantErr: `--context: no context named "nope"`},
		{name: "unknown FALCON_CONTEXT lists the known ones", file: file, env: map[string]string{ContextEnv: "nope"}, wantErr: "contexts: empty, lab, prod"},
		{name: "a context naming no server", file: file, choice: Choice{Context: "empty"}, wantErr: `context "empty"`},
		{name: "a current-context naming no server", file: "current-context: empty\ncontexts:\n  empty: {}\n", wantErr: "names no server"},
		{name: "a current-context that is missing", file: "current-context: gone\n", wantErr: `current-context: no context named "gone"`},
		{name: "a misspelt key", file: "current_context: prod\n", wantErr: "current_context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &File{Path: filepath.Join(t.TempDir(), FileName)}
			if tt.file != "" {
				if err := os.WriteFile(f.Path, []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Resolve(tt.choice, func(k string) string { return tt.env[k] }, f, fallback)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("err = %v, want an invalid-input error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSaveLoad(t *testing.T) {
	f := &File{Path: filepath.Join(t.TempDir(), "sub", FileName)}
	c, err := f.Load()
	if err != nil || len(c.Contexts) != 0 {
		t.Fatalf("missing file: %+v, %v", c, err)
	}
	c.Contexts["lab"] = &Context{Server: "http://lab:7070"}
	c.CurrentContext = "lab"
	if err := f.Save(c); err != nil {
		t.Fatal(err)
	}
	back, err := f.Load()
	if err != nil || back.CurrentContext != "lab" || back.Contexts["lab"].Server != "http://lab:7070" {
		t.Fatalf("read back %+v, %v", back, err)
	}
	b, _ := os.ReadFile(f.Path)
	if !strings.Contains(string(b), "current-context: lab") {
		t.Errorf("file:\n%s", b)
	}
}
