package factory

import (
	"time"

	"github.com/falconhq/falcon/internal/cli/contexts"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Factory provides a command's dependencies. Fields are functions so that
// nothing is resolved before flags are parsed: the client depends on
// --server and the format on -o, and commands like `version` never need a
// client at all.
type Factory struct {
	IOStreams *iostreams.IOStreams
	// Client returns the API client; it is built on first use. It attaches
	// the server's token (see credentials.Resolver).
	Client func() (*client.Client, error)
	// Server returns the --server URL, normalized (client.NormalizeServer).
	Server func() (string, error)
	// Credentials returns the token cache.
	Credentials func() (*credentials.Store, error)
	// Getenv reads the invocation's environment (FALCON_TOKEN); nil means
	// an empty environment.
	Getenv func(string) string
	// OutputFormat is the format of -o, or the default for this stdout:
	// table on a terminal, json otherwise.
	OutputFormat func() output.Format
	// Now is the clock for ages in tables and for waiting; nil means time.Now.
	Now func() time.Time
	// JQ is the --jq expression, nil when none was given (or unset).
	JQ func() *output.Query
	// Color reports whether tables may colour statuses (--color, NO_COLOR,
	// a terminal); nil means never.
	Color func() bool
	// Contexts returns the configuration file of named servers; nil or an
	// error means there is none to read or write.
	Contexts func() (*contexts.File, error)
}

// Printer returns a printer for the user's chosen format, writing to stdout
// with hints on stderr.
func (f *Factory) Printer() *output.Printer {
	p := output.New(f.IOStreams.Out, f.IOStreams.ErrOut, f.OutputFormat(), f.Clock())
	if f.JQ != nil {
		p.JQ = f.JQ()
	}
	if f.Color != nil {
		p.Color = f.Color()
	}
	return p
}

// Env reads the environment through f.Getenv.
func (f *Factory) Env(key string) string {
	if f.Getenv == nil {
		return ""
	}
	return f.Getenv(key)
}

// Clock returns f.Now, or time.Now when unset.
func (f *Factory) Clock() func() time.Time {
	if f.Now == nil {
		return time.Now
	}
	return f.Now
}
