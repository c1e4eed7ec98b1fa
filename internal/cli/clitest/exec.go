package clitest

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// Execute runs a command built by a NewCmdX function with args, as the root
// would, and returns its error. Cobra's own printing is discarded: the
// command's output goes to the Factory's streams.
func Execute(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	_, err := cmd.ExecuteContextC(context.Background())
	return err
}
