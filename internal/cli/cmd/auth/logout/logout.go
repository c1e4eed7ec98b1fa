package logout

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
)

// Options are the inputs of `falcon auth logout`.
type Options struct {
	IO          *iostreams.IOStreams
	Server      func() (string, error)
	Credentials func() (*credentials.Store, error)
	Getenv      func(string) string
}

// NewCmdLogout builds the command. runF replaces logoutRun in tests.
func NewCmdLogout(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Server: f.Server, Credentials: f.Credentials, Getenv: f.Env}
	return &cobra.Command{
		Use: "logout",
		Example: `  falcon auth logout
  falcon auth logout --server https://falcon.example.com`,
		Short: "Forget the cached login for a server",
		Long: `Remove the token for --server from the credentials file. Logging out of a
server you are not logged in to is not an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return logoutRun(opts)
		},
	}
}

func logoutRun(opts *Options) error {
	server, err := opts.Server()
	if err != nil {
		return err
	}
	store, err := opts.Credentials()
	if err != nil {
		return err
	}
	had, err := store.Delete(server)
	if err != nil {
		return err
	}
	if had {
		fmt.Fprintf(opts.IO.ErrOut, "Logged out of %s.\n", server)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Not logged in to %s; nothing to do.\n", server)
	}
	if opts.Getenv(credentials.TokenEnv) != "" {
		fmt.Fprintf(opts.IO.ErrOut, "Note: %s is set and is still sent.\n", credentials.TokenEnv)
	}
	return nil
}
