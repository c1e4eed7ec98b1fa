package audit

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/audit/list"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdAudit returns `falcon audit` with its verbs.
func NewCmdAudit(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use:   "audit <command>",
		Short: "Read the audit log (admins)",
	})
	cmd.AddCommand(list.NewCmdList(f, nil))
	return cmd
}
