package contexts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Environment variables Resolve reads.
const (
	ServerEnv  = "FALCON_SERVER"
	ContextEnv = "FALCON_CONTEXT"
	// DirEnv overrides the directory of the file (default ~/.falcon); the
	// credentials file lives beside it.
	DirEnv = "FALCON_CONFIG_DIR"
)

// FileName is the file's name inside the config directory.
const FileName = "config.yaml"

// Context is one named server.
type Context struct {
	Server string `json:"server,omitempty"`
}

// Config is the file's content.
type Config struct {
	CurrentContext string              `json:"current-context,omitempty"`
	Contexts       map[string]*Context `json:"contexts,omitempty"`
}

// Names are the contexts' names, sorted.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Server is the server of the context name; source is what named it (a
// flag, a variable, the file's current-context), for the error.
func (c *Config) Server(name, source, path string) (string, error) {
	ctx, ok := c.Contexts[name]
	if !ok {
		known := "none yet"
		if names := c.Names(); len(names) > 0 {
			known = strings.Join(names, ", ")
		}
		return "", errdefs.Invalid(source, "no context named %q in %s (contexts: %s); add it with `falcon config set-context %s --server URL`", name, path, known, name)
	}
	if strings.TrimSpace(ctx.Server) == "" {
		return "", errdefs.Invalid(source, "context %q in %s names no server; set one with `falcon config set-context %s --server URL`", name, path, name)
	}
	return ctx.Server, nil
}

// File is the configuration file at Path.
type File struct {
	Path string
}

// Default is the file in $FALCON_CONFIG_DIR, or else in $HOME/.falcon.
func Default(getenv func(string) string) (*File, error) {
	dir := getenv(DirEnv)
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return nil, errdefs.Precondition("cannot place %s: set HOME or %s", FileName, DirEnv)
		}
		dir = filepath.Join(home, ".falcon")
	}
	return &File{Path: filepath.Join(dir, FileName)}, nil
}

// Load reads the file; a missing file is an empty configuration.
func (f *File) Load() (*Config, error) {
	c := &Config{}
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		c.Contexts = map[string]*Context{}
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Path, err)
	}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		return nil, errdefs.Invalid(f.Path, "%v (fields: current-context, contexts.<name>.server)", err)
	}
	if c.Contexts == nil {
		c.Contexts = map[string]*Context{}
	}
	return c, nil
}

// Save replaces the file atomically (a new file renamed over the old one),
// so a crash never leaves half of it.
func (f *File) Save(c *Config) error {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, FileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return os.Rename(tmp.Name(), f.Path)
}

// Choice is what the command line said about the server.
type Choice struct {
	// Server is --server when given.
	Server string
	// Context is --context when given.
	Context string
}

// Resolve picks the server, in the order the package comment gives;
// fallback is the server when nothing names one. The file is read only
// when a context decides.
func Resolve(ch Choice, getenv func(string) string, file *File, fallback string) (string, error) {
	if ch.Server != "" {
		return ch.Server, nil
	}
	load := func() (*Config, error) {
		if file == nil {
			return nil, errdefs.Precondition("cannot read contexts: set HOME or %s", DirEnv)
		}
		return file.Load()
	}
	if ch.Context != "" {
		c, err := load()
		if err != nil {
			return "", err
		}
		return c.Server(ch.Context, "--context", file.Path)
	}
	if v := getenv(ServerEnv); v != "" {
		return v, nil
	}
	if v := getenv(ContextEnv); v != "" {
		c, err := load()
		if err != nil {
			return "", err
		}
		return c.Server(v, ContextEnv, file.Path)
	}
	if file == nil {
		return fallback, nil
	}
	c, err := file.Load()
	if err != nil {
		return "", err
	}
	if c.CurrentContext != "" {
		return c.Server(c.CurrentContext, "current-context", file.Path)
	}
	return fallback, nil
}
