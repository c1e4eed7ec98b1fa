package user

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/user/list"
	"github.com/falconhq/falcon/internal/cli/cmd/user/relink"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdUser returns `falcon user` with its verbs.
func NewCmdUser(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use:     "user <command>",
		Aliases: []string{"users"},
		Short:   "List users and relink recreated identities (admins)",
		Example: `  falcon user list
  falcon user relink alice@example.com --sub 0b7a-new-subject`,
	})
	cmd.AddCommand(list.NewCmdList(f, nil), relink.NewCmdRelink(f, nil))
	return cmd
}
