package audit

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/audit/list"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdAudit returns `falcon audit` with its verbs.
func NewCmdAudit(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use: "audit <command>",
		Example: `  falcon audit list --exp exp-q7odgo8q9x
  falcon audit list --method AbortExp -o json --jq '.items[].actor'`,
		Short: "Read the audit log (admins)",
	})
	cmd.AddCommand(list.NewCmdList(f, nil))
	return cmd
}
