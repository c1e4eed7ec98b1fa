package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon auth status`.
type Options struct {
	Server      func() (string, error)
	Credentials func() (*credentials.Store, error)
	Getenv      func(string) string
	Printer     func() *output.Printer
	Now         func() time.Time
	// Client reaches the server without a login, to tell a server that
	// needs none (falcon dev) from a missing login.
	Client func() (*client.Client, error)
}

// NewCmdStatus builds the command. runF replaces statusRun in tests.
func NewCmdStatus(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Server: f.Server, Credentials: f.Credentials, Getenv: f.Env, Printer: f.Printer, Now: f.Clock(), Client: f.Client}
	cmd := &cobra.Command{
		Use: "status",
		Example: `  falcon auth status
  falcon auth status -o json --jq .user`,
		Short: "Show whom the CLI is logged in as",
		Long: `Show the login the CLI would use for --server: the user, when the token
expires, and where it comes from (FALCON_TOKEN or the credentials file).
Without a login it asks the server: one that needs none (falcon dev) says
whom it attributes calls to. Exits 5 when a login is needed and there is
none, or it has expired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func statusRun(ctx context.Context, opts *Options) error {
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
		if u, err := noLoginNeeded(ctx, opts); err == nil {
			msg, err := structpb.NewStruct(map[string]any{"server": server, "user": u.GetEmail(), "source": "none needed", "expires_at": nil})
			if err != nil {
				return err
			}
			return opts.Printer().Print(msg, func(v output.View) error {
				_, err := fmt.Fprintf(v.Out, "No login needed: %s attributes calls to %s.\n", server, u.GetEmail())
				return err
			})
		}
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

// noLoginNeeded asks the server who the caller is without a token: a server
// checking tokens refuses, one that needs none (falcon dev, --auth none)
// answers with the user it attributes calls to.
func noLoginNeeded(ctx context.Context, opts *Options) (*falconv1.User, error) {
	if opts.Client == nil {
		return nil, errors.New("no client")
	}
	c, err := opts.Client()
	if err != nil {
		return nil, err
	}
	// Only a hint: a server that does not answer soon gets the plain
	// "not logged in".
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return c.GetCurrentUser(ctx, &falconv1.GetCurrentUserRequest{})
}
