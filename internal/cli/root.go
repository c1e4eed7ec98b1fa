package cli

import (
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/analyze"
	"github.com/falconhq/falcon/internal/cli/cmd/artifact"
	"github.com/falconhq/falcon/internal/cli/cmd/audit"
	authcmd "github.com/falconhq/falcon/internal/cli/cmd/auth"
	"github.com/falconhq/falcon/internal/cli/cmd/cluster"
	"github.com/falconhq/falcon/internal/cli/cmd/config"
	"github.com/falconhq/falcon/internal/cli/cmd/exp"
	"github.com/falconhq/falcon/internal/cli/cmd/job"
	"github.com/falconhq/falcon/internal/cli/cmd/report"
	simcmd "github.com/falconhq/falcon/internal/cli/cmd/sim"
	"github.com/falconhq/falcon/internal/cli/cmd/user"
	"github.com/falconhq/falcon/internal/cli/cmd/version"
	"github.com/falconhq/falcon/internal/cli/contexts"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// DefaultServer is where `falcon dev` serves the HTTP API.
const DefaultServer = "http://127.0.0.1:7070"

// Environment variables the root reads (contexts reads FALCON_SERVER and
// FALCON_CONTEXT).
const (
	// ServerEnv overrides DefaultServer and the current context.
	ServerEnv = contexts.ServerEnv
	// OutputEnv is the format when -o is not given (json, wide...),
	// instead of table on a terminal and json otherwise.
	OutputEnv = "FALCON_OUTPUT"
)

// globalFlags are the root's persistent flags, read lazily by the Factory.
type globalFlags struct {
	server  string
	context string
	output  output.FormatFlag
	jq      string
	color   output.ColorFlag

	query *output.Query // --jq, compiled by the root's pre-run
}

// newFactory returns the Factory of a real invocation: its client and format
// follow the global flags once cobra has parsed them.
func newFactory(ios *iostreams.IOStreams, getenv func(string) string) (*factory.Factory, *globalFlags) {
	g := &globalFlags{}
	f := &factory.Factory{IOStreams: ios, Now: time.Now, Getenv: getenv}
	f.Contexts = func() (*contexts.File, error) { return contexts.Default(getenv) }
	f.Server = sync.OnceValues(func() (string, error) {
		file, _ := f.Contexts() // without HOME, only flags and variables can name a server
		server, err := contexts.Resolve(contexts.Choice{Server: g.server, Context: g.context}, getenv, file, DefaultServer)
		if err != nil {
			return "", err
		}
		return client.NormalizeServer(server)
	})
	f.Credentials = func() (*credentials.Store, error) { return credentials.Default(getenv) }
	f.Client = sync.OnceValues(func() (*client.Client, error) {
		server, err := f.Server()
		if err != nil {
			return nil, err
		}
		// Without HOME the cache cannot be placed; FALCON_TOKEN still works.
		store, _ := credentials.Default(getenv)
		tokens := credentials.Resolver{Server: server, Store: store, Getenv: getenv, Now: f.Clock()}
		return client.New(server, client.WithUserAgent("falcon-cli/"+version.Current().Version),
			client.WithToken(tokens.Token))
	})
	f.OutputFormat = func() output.Format {
		if g.output.Value != "" {
			return g.output.Value
		}
		if g.jq != "" {
			return output.JSON
		}
		if v, err := output.ParseFormat(getenv(OutputEnv)); err == nil && v != "" {
			return v
		}
		if ios.IsStdoutTTY() {
			return output.Table
		}
		return output.JSON
	}
	f.JQ = func() *output.Query { return g.query }
	f.Color = func() bool { return output.UseColor(g.color.Value, ios.IsStdoutTTY(), getenv) }
	return f, g
}

// checkGlobalFlags is the root's pre-run: what the global flags and
// variables say is checked before any command runs, so a bad --jq or
// FALCON_OUTPUT fails the same way whatever the command.
func checkGlobalFlags(cmd *cobra.Command, g *globalFlags, getenv func(string) string) error {
	if v := getenv(OutputEnv); v != "" {
		if _, err := output.ParseFormat(v); err != nil {
			return errdefs.Invalid(OutputEnv, "unknown output format %q; allowed: %s", v, strings.Join(output.FormatNames(), ", "))
		}
	}
	if !cmd.Flags().Changed("jq") {
		return nil
	}
	if why := notADocument[cmd.CommandPath()]; why != "" {
		return errdefs.Invalid("--jq", "%s prints no JSON document to filter (%s)", cmd.CommandPath(), why)
	}
	if g.output.Value != "" && g.output.Value != output.JSON {
		return errdefs.Invalid("--jq", "filters JSON output; it cannot be combined with -o %s", g.output.Value)
	}
	q, err := output.ParseQuery(g.jq)
	if err != nil {
		return err
	}
	g.query = q
	return nil
}

// newCmdRoot builds the `falcon` command tree, binding the global flags to g.
func newCmdRoot(f *factory.Factory, g *globalFlags, getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "falcon <command>",
		Short: "Run ML experiments on accelerator slices",
		Long: `Falcon runs experiments (training, profiling, benchmarks...) on TPU and GPU
slices and keeps their logs and artifacts.

Every command takes -o json for scripts and agents. Exit codes: 0 ok,
1 other error, 2 invalid input, 3 not found, 4 wrong state or name already
taken, 5 not logged in or not allowed, 6 server unreachable or not
answering, 7 experiment did not succeed (exp wait), 8 timed out (exp wait).

Servers behind Cloudflare Access need a login: falcon auth login --server URL.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := checkGlobalFlags(cmd, g, getenv); err != nil {
			return &runError{err}
		}
		if err := resolveExpNames(cmd.Context(), cmd, args, f); err != nil {
			return &runError{err}
		}
		return nil
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", "", "Falcon API server URL (default: $"+ServerEnv+", the context's server, else "+DefaultServer+")")
	pf.StringVar(&g.context, "context", "", "Named server from ~/.falcon/config.yaml (default: $"+contexts.ContextEnv+", else its current-context)")
	pf.VarP(&g.output, "output", "o", "Output format: table, wide (tables with each row's message), json, yaml, md (Markdown tables) or name (IDs only) (default: $"+OutputEnv+", else table on a terminal and json otherwise)")
	pf.StringVar(&g.jq, "jq", "", "Filter JSON output with a jq expression (implies -o json; strings print bare)")
	pf.Var(&g.color, "color", "Colour statuses in tables: auto (a terminal, unless NO_COLOR is set), always or never")

	root.AddCommand(
		exp.NewCmdExp(f),
		job.NewCmdJob(f),
		artifact.NewCmdArtifact(f),
		analyze.NewCmdAnalyze(f),
		report.NewCmdReport(f),
		cluster.NewCmdCluster(f),
		authcmd.NewCmdAuth(f),
		config.NewCmdConfig(f),
		audit.NewCmdAudit(f),
		user.NewCmdUser(f),
		version.NewCmdVersion(f, nil),
		simcmd.NewCmdSim(f, nil),
	)
	addServerCommands(root, f)
	addFallbackExamples(root)
	addCompletions(root, f)
	markRunErrors(root)
	return root
}

// CommandTree is the `falcon` command tree as a process builds it, for
// checks that hold text to the real commands and flags (agent skills,
// examples). It is built with an empty environment and runs nothing.
func CommandTree() *cobra.Command {
	ios, _, _, _ := iostreams.Test()
	empty := func(string) string { return "" }
	f, g := newFactory(ios, empty)
	return newCmdRoot(f, g, empty)
}
