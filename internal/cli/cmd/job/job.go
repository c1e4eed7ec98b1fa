package job

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/job/get"
	"github.com/falconhq/falcon/internal/cli/cmd/job/list"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdJob returns `falcon job` with its verbs.
func NewCmdJob(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use: "job <command>",
		Example: `  falcon job list --status pending -o wide
  falcon job get job-ki5t2jegpi`,
		Aliases: []string{"jobs"},
		Short:   "Inspect the jobs of experiments",
	})
	cmd.AddCommand(list.NewCmdList(f, nil), get.NewCmdGet(f, nil))
	return cmd
}
