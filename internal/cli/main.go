package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Main runs the CLI with the process's arguments, streams and environment
// and returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], iostreams.System(), os.Getenv)
}

// run executes one invocation; tests call it with buffers and a fake
// environment.
func run(ctx context.Context, args []string, ios *iostreams.IOStreams, getenv func(string) string) int {
	f, g := newFactory(ios, getenv)
	root := newCmdRoot(f, g, getenv)
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return errdefs.ExitOK
	}
	var (
		code int
		kind string
		re   *runError
	)
	if errors.As(err, &re) {
		err = re.err
		code, kind = classify(err)
	} else {
		// Cobra rejected the command line before any command ran.
		code, kind = errdefs.ExitInvalid, codes.InvalidArgument.String()
	}
	var ee *factory.ExitError
	if !errors.As(err, &ee) || !ee.Quiet {
		printError(ios, f, cmd, err, code, kind, re == nil)
	}
	return code
}

// classify picks the exit code and the machine-readable kind of an error
// returned by a command.
func classify(err error) (int, string) {
	var ee *factory.ExitError
	if errors.As(err, &ee) {
		return ee.Code, ee.Kind
	}
	c := errdefs.Code(err)
	return errdefs.ExitCode(c), c.String()
}

func printError(ios *iostreams.IOStreams, f *factory.Factory, cmd *cobra.Command, err error, code int, kind string, usage bool) {
	msg := errdefs.Message(err) // the text after "Error: "
	if kind == codes.InvalidArgument.String() && cmd != nil {
		msg = factory.NameFlags(cmd, msg)
	}
	if kind == codes.Unauthenticated.String() && !strings.Contains(msg, "falcon auth login") && f.Server != nil {
		// The server refused the token (it verifies every one, whatever
		// the CLI checked): say how to get a new one.
		if server, serr := f.Server(); serr == nil {
			msg += fmt.Sprintf("; run `falcon auth login --server %s`", server)
		}
	}
	fmt.Fprintf(ios.ErrOut, "Error: %s\n", msg)
	if usage && cmd != nil {
		fmt.Fprintf(ios.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	if f.OutputFormat() != output.JSON {
		return
	}
	b, jerr := json.Marshal(map[string]any{"error": map[string]any{"code": kind, "message": msg, "exit_code": code}})
	if jerr == nil {
		fmt.Fprintf(ios.ErrOut, "%s\n", b)
	}
}

// runError marks an error returned by a command's RunE, as opposed to one
// cobra raised while parsing the command line.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// markRunErrors wraps the RunE of cmd and all its descendants so run can tell
// a command's failure (exit code from its gRPC code) from a usage error
// (always errdefs.ExitInvalid), which cobra returns as plain errors.
func markRunErrors(cmd *cobra.Command) {
	if inner := cmd.RunE; inner != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if err := inner(c, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markRunErrors(sub)
	}
}
