package exp

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/exp/abort"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/compare"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/cp"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/create"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/delete"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/diff"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/events"
	execcmd "github.com/falconhq/falcon/internal/cli/cmd/exp/exec"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/explain"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/extend"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/get"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/list"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/logs"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/metrics"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/validate"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/wait"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdExp returns `falcon exp` with its verbs.
func NewCmdExp(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use: "exp <command>",
		Example: `  falcon exp create -f examples/hello.yaml --generate-name
  falcon exp list -o wide
  falcon exp wait my-run --timeout 8h`,
		Aliases: []string{"experiment", "experiments", "exps"},
		Short:   "Create, inspect, follow and stop experiments",
	})
	cmd.AddCommand(
		create.NewCmdCreate(f, nil),
		validate.NewCmdValidate(f, nil),
		get.NewCmdGet(f, nil),
		list.NewCmdList(f, nil),
		logs.NewCmdLogs(f, nil),
		events.NewCmdEvents(f, nil),
		explain.NewCmdExplain(f, nil),
		metrics.NewCmdMetrics(f, nil),
		diff.NewCmdDiff(f, nil),
		compare.NewCmdCompare(f, nil),
		wait.NewCmdWait(f, nil),
		execcmd.NewCmdExec(f, nil),
		cp.NewCmdCp(f, nil),
		abort.NewCmdAbort(f, nil),
		extend.NewCmdExtend(f, nil),
		delete.NewCmdDelete(f, nil),
	)
	return cmd
}
