package auth

import (
	"github.com/spf13/cobra"

	"github.com/falconhq/falcon/internal/cli/cmd/auth/login"
	"github.com/falconhq/falcon/internal/cli/cmd/auth/logout"
	"github.com/falconhq/falcon/internal/cli/cmd/auth/status"
	"github.com/falconhq/falcon/internal/cli/cmd/auth/token"
	"github.com/falconhq/falcon/internal/cli/factory"
)

// NewCmdAuth returns `falcon auth` with its verbs.
func NewCmdAuth(f *factory.Factory) *cobra.Command {
	cmd := factory.Group(&cobra.Command{
		Use: "auth <command>",
		Example: `  falcon auth login --server https://falcon.example.com
  falcon auth status`,
		Short: "Log in to a Falcon server and manage the cached token",
		Long: `Log in to a Falcon server behind Cloudflare Access and manage the token the
CLI sends. falcon dev needs no login. Set FALCON_TOKEN to use a token
without logging in (CI, agents); it overrides the cached login.`,
	})
	cmd.AddCommand(
		login.NewCmdLogin(f, nil),
		status.NewCmdStatus(f, nil),
		logout.NewCmdLogout(f, nil),
		token.NewCmdToken(f, nil),
	)
	return cmd
}
