package token

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
)

// Options are the inputs of `falcon auth token`.
type Options struct {
	IO          *iostreams.IOStreams
	Server      func() (string, error)
	Credentials func() (*credentials.Store, error)
	Getenv      func(string) string
	Now         func() time.Time
}

// NewCmdToken builds the command. runF replaces tokenRun in tests.
func NewCmdToken(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Server: f.Server, Credentials: f.Credentials, Getenv: f.Env, Now: f.Clock()}
	return &cobra.Command{
		Use:     "token",
		Short:   "Print the token sent to the server, for scripts",
		Example: `  curl -H "Authorization: Bearer $(falcon auth token)" "$FALCON_SERVER/v1/experiments"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return tokenRun(cmd.Context(), opts)
		},
	}
}

func tokenRun(ctx context.Context, opts *Options) error {
	server, err := opts.Server()
	if err != nil {
		return err
	}
	store, err := opts.Credentials()
	if err != nil && opts.Getenv(credentials.TokenEnv) == "" {
		return err
	}
	r := credentials.Resolver{Server: server, Store: store, Getenv: opts.Getenv, Now: opts.Now}
	tok, err := r.Token(ctx)
	if err != nil {
		return err
	}
	if tok == "" {
		return credentials.NotLoggedInError(server)
	}
	_, err = fmt.Fprintln(opts.IO.Out, tok)
	return err
}
