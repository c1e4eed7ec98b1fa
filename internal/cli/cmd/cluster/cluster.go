package cluster

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/cluster/apply"
	"github.com/falconhq/falcon/internal/cli/cmd/cluster/create"
	"github.com/falconhq/falcon/internal/cli/cmd/cluster/get"
	"github.com/falconhq/falcon/internal/cli/cmd/cluster/list"
	"github.com/falconhq/falcon/internal/cli/cmd/cluster/setstatus"
	"github.com/falconhq/falcon/internal/cli/cmd/cluster/status"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdCluster returns `falcon cluster` with its verbs.
func NewCmdCluster(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use:     "cluster <command>",
		Aliases: []string{"clusters"},
		Short:   "Register and inspect the clusters experiments run on",
	})
	cmd.AddCommand(
		list.NewCmdList(f, nil),
		get.NewCmdGet(f, nil),
		status.NewCmdStatus(f, nil),
		create.NewCmdCreate(f, nil),
		apply.NewCmdApply(f, nil),
		setstatus.NewCmdSetStatus(f, nil),
	)
	return cmd
}
