package relink

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon user relink`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	Email string
	Sub   string
}

// NewCmdRelink builds the command. runF replaces relinkRun in tests.
func NewCmdRelink(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "relink EMAIL --sub SUB",
		Short: "Move a user to their recreated Cloudflare identity",
		Long: `Link the user registered with EMAIL to the Cloudflare Access identity SUB.

Cloudflare gives a person a new identity (a new sub) when they are removed
from Access and added again. Falcon keeps them registered under the old
one, so their calls are refused with "registered to another identity"; the
refusal, and the server's log, give the command to run, with the new SUB.
The user's account and their experiments move to it in one step, and the
old identity is refused from then on. Past audit entries keep the old
user_id; the relink itself is audited.

Take SUB from that refusal or the server's log, not from anyone's say-so:
whoever holds the identity SUB acts as the user from then on. A SUB that
another user has is refused, and relinking to the SUB the user already has
changes nothing. Only admins may relink.`,
		Example: `  falcon user relink ada@example.com --sub 0b8a6c1e-4f7d-4a43-9b7e-2f0c5d1e9a77`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Email = strings.TrimSpace(args[0])
			opts.Sub = strings.TrimSpace(opts.Sub)
			if opts.Email == "" {
				return errdefs.Invalid("EMAIL", "is required: the email the user is registered with")
			}
			if opts.Sub == "" {
				return errdefs.Invalid("--sub", "is required: the new identity's Cloudflare Access subject, which the refusal of the user's calls names")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return relinkRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Sub, "sub", "", "The new identity's Cloudflare Access subject (required)")
	return cmd
}

func relinkRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.RelinkUser(ctx, &falconv1.RelinkUserRequest{Email: opts.Email, Sub: opts.Sub})
	if err != nil {
		return err
	}
	return opts.Printer().Print(resp, func(v output.View) error {
		u := resp.GetUser()
		if !resp.GetChanged() {
			fmt.Fprintf(v.Out, "%s is already linked to %s; nothing changed\n", u.GetEmail(), u.GetUserId())
			return nil
		}
		fmt.Fprintf(v.Out, "Relinked %s: %s -> %s, %d experiments moved\n",
			u.GetEmail(), resp.GetPreviousUserId(), u.GetUserId(), resp.GetExperiments())
		fmt.Fprintln(v.Notes, "Their next call is admitted; the old identity is refused (by every server replica within a minute).")
		return nil
	})
}
