package status

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon auth status`.
type Options struct {
	Server      func() (string, error)
	Credentials func() (*credentials.Store, error)
	Getenv      func(string) string
	Printer     func() *output.Printer
	Now         func() time.Time
}

// NewCmdStatus builds the command. runF replaces statusRun in tests.
func NewCmdStatus(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Server: f.Server, Credentials: f.Credentials, Getenv: f.Env, Printer: f.Printer, Now: f.Clock()}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show whom the CLI is logged in as",
		Long: `Show the login the CLI would use for --server: the user, when the token
expires, and where it comes from (FALCON_TOKEN or the credentials file).
Exits 5 when there is no login or it has expired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statusRun(opts)
		},
	}
	return cmd
}

func statusRun(opts *Options) error {
	server, err := opts.Server()
	if err != nil {
		return err
	}
	store, err := opts.Credentials()
	if err != nil && opts.Getenv(credentials.TokenEnv) == "" {
		return err
	}
	l, ok, err := credentials.Resolver{Server: server, Store: store, Getenv: opts.Getenv, Now: opts.Now}.Lookup()
	if err != nil {
		return err
	}
	if !ok {
		return credentials.NotLoggedInError(server)
	}
	now := opts.Now()
	if l.Expired(now) {
		return credentials.ExpiredError(server, l)
	}
	fields := map[string]any{"server": server, "user": l.User, "source": l.Source, "expires_at": nil}
	if !l.Expiry.IsZero() {
		fields["expires_at"] = l.Expiry.UTC().Format(time.RFC3339)
	}
	msg, err := structpb.NewStruct(fields)
	if err != nil {
		return err
	}
	return opts.Printer().Print(msg, func(v output.View) error {
		user := l.User
		if user == "" {
			user = "an unknown user"
		}
		fmt.Fprintf(v.Out, "Logged in to %s as %s.\n", server, user)
		if !l.Expiry.IsZero() {
			fmt.Fprintf(v.Out, "  expires: %s (in %s)\n", l.Expiry.Local().Format("2006-01-02 15:04 MST"), l.Expiry.Sub(now).Round(time.Minute))
		}
		_, err := fmt.Fprintf(v.Out, "  token from: %s\n", l.Source)
		return err
	})
}
