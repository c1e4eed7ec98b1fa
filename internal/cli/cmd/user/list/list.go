package list

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon user list`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer
}

// NewCmdList builds the command. runF replaces listRun in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List registered users",
		Long: `List every user and service principal the server has registered (users
register themselves on their first call), by user_id: the Cloudflare Access
subject of a person, service:<common_name> of a service token.

ADMIN says whether the server names the user an admin by email
(--admin-email). Admins named by group are known only from their own
tokens, so a user shown as no admin may still be one when the server has
group entries; the table says so. Only admins may list users.`,
		Example: `  falcon user list
  falcon user list -o json | jq -r '.items[] | select(.admin) | .email'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
}

func listRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.ListUsers(ctx, &falconv1.ListUsersRequest{})
	if err != nil {
		return err
	}
	return opts.Printer().Print(resp, table(resp))
}

// table is the human view: one user a line. It lives here rather than in
// output because no other command shows users.
func table(resp *falconv1.ListUsersResponse) output.TableFunc {
	return func(v output.View) error {
		if len(resp.GetItems()) == 0 {
			_, err := fmt.Fprintln(v.Notes, "No users registered.")
			return err
		}
		cols := []output.Column[*falconv1.User]{
			{Header: "USER_ID", Value: func(u *falconv1.User) string { return u.GetUserId() }},
			{Header: "EMAIL", Value: func(u *falconv1.User) string { return u.GetEmail() }},
			{Header: "ADMIN", Value: func(u *falconv1.User) string {
				if u.GetAdmin() {
					return "yes"
				}
				return "no"
			}},
			{Header: "REGISTERED", Value: func(u *falconv1.User) string { return output.Age(v.Now, u.GetCreatedAt()) }},
		}
		if err := output.WriteTable(v.Out, cols, resp.GetItems()); err != nil {
			return err
		}
		if resp.GetAdminsByGroup() {
			fmt.Fprintln(v.Notes, "The server also names admins by group, which only their tokens show: ADMIN says who is one by email.")
		}
		return nil
	}
}
