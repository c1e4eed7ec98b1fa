package artifact

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/artifact/cat"
	"github.com/falconhq/falcon/internal/cli/cmd/artifact/get"
	"github.com/falconhq/falcon/internal/cli/cmd/artifact/ls"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdArtifact returns `falcon artifact` with its verbs.
func NewCmdArtifact(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use: "artifact <command>",
		Example: `  falcon artifact ls exp-q7odgo8q9x
  falcon artifact get exp-q7odgo8q9x --to ./results
  falcon artifact cat exp-q7odgo8q9x metrics.jsonl | tail -1`,
		Aliases: []string{"artifacts", "art"},
		Short:   "List, read and download the files an experiment's job wrote",
	})
	cmd.AddCommand(ls.NewCmdLs(f, nil), cat.NewCmdCat(f, nil), get.NewCmdGet(f, nil))
	return cmd
}
