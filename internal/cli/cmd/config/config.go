package config

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/config/getcontexts"
	"github.com/falconhq/falcon/internal/cli/cmd/config/setcontext"
	"github.com/falconhq/falcon/internal/cli/cmd/config/usecontext"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdConfig returns `falcon config` with its verbs.
func NewCmdConfig(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use:   "config <command>",
		Short: "Name Falcon servers (contexts) and pick the one to use",
		Long: `Name Falcon servers in ~/.falcon/config.yaml ($FALCON_CONFIG_DIR/config.yaml)
and pick the one commands use. The server of a command is, in this order:
--server, --context, $FALCON_SERVER, $FALCON_CONTEXT, the file's
current-context, then falcon dev's http://127.0.0.1:7070.`,
		Example: `  falcon config set-context prod --server https://falcon.example.com --use
  falcon config get-contexts
  FALCON_CONTEXT=dev falcon exp list`,
	})
	cmd.AddCommand(getcontexts.NewCmdGetContexts(f, nil), usecontext.NewCmdUseContext(f, nil), setcontext.NewCmdSetContext(f, nil))
	return cmd
}
