package cli

import (
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/analyze"
	"github.com/falconhq/falcon/internal/cli/cmd/artifact"
	"github.com/falconhq/falcon/internal/cli/cmd/audit"
	authcmd "github.com/falconhq/falcon/internal/cli/cmd/auth"
	"github.com/falconhq/falcon/internal/cli/cmd/cluster"
	"github.com/falconhq/falcon/internal/cli/cmd/exp"
	"github.com/falconhq/falcon/internal/cli/cmd/job"
	"github.com/falconhq/falcon/internal/cli/cmd/report"
	"github.com/falconhq/falcon/internal/cli/cmd/user"
	"github.com/falconhq/falcon/internal/cli/cmd/version"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// DefaultServer is where `falcon dev` serves the HTTP API.
const DefaultServer = "http://127.0.0.1:7070"

// ServerEnv names the environment variable that overrides DefaultServer.
const ServerEnv = "FALCON_SERVER"

// globalFlags are the root's persistent flags, read lazily by the Factory.
type globalFlags struct {
	server string
	output output.FormatFlag
}

// newFactory returns the Factory of a real invocation: its client and format
// follow the global flags once cobra has parsed them.
func newFactory(ios *iostreams.IOStreams, getenv func(string) string) (*factory.Factory, *globalFlags) {
	g := &globalFlags{}
	f := &factory.Factory{IOStreams: ios, Now: time.Now, Getenv: getenv}
	f.Server = func() (string, error) { return client.NormalizeServer(g.server) }
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
		if ios.IsStdoutTTY() {
			return output.Table
		}
		return output.JSON
	}
	return f, g
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
	server := DefaultServer
	if v := getenv(ServerEnv); v != "" {
		server = v
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", server, "Falcon API server URL (env "+ServerEnv+")")
	pf.VarP(&g.output, "output", "o", "Output format: table, json, yaml or md (Markdown tables) (default: table on a terminal, json otherwise)")

	root.AddCommand(
		exp.NewCmdExp(f),
		job.NewCmdJob(f),
		artifact.NewCmdArtifact(f),
		analyze.NewCmdAnalyze(f),
		report.NewCmdReport(f),
		cluster.NewCmdCluster(f),
		authcmd.NewCmdAuth(f),
		audit.NewCmdAudit(f),
		user.NewCmdUser(f),
		version.NewCmdVersion(f, nil),
	)
	addServerCommands(root, f)
	markRunErrors(root)
	return root
}
