package wait

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp wait`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer
	// Now and Sleep are the clock; tests make Sleep advance Now.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error

	ID       string
	Timeout  time.Duration // 0: no limit
	Interval time.Duration
}

// NewCmdWait builds the command. runF replaces waitRun in tests.
func NewCmdWait(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer, Now: f.Clock(), Sleep: sleep}
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait for an experiment to end",
		Long: fmt.Sprintf(`Wait until an experiment ends, then print it.

Exit codes: 0 when it succeeded, %d when it failed or was aborted, %d when
--timeout passed first (the message names the last status seen), %d when the
server does not answer within its first 10s. Once it has answered, failures
to reach it (a restart) are retried until the timeout.`, errdefs.ExitNotSucceeded, errdefs.ExitTimeout, errdefs.ExitUnavailable),
		Example: `  falcon exp wait exp-q7odgo8q9x --timeout 8h && falcon exp logs exp-q7odgo8q9x --tail 20`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.Timeout < 0 {
				return errdefs.Invalid("--timeout", "must not be negative, got %s", opts.Timeout)
			}
			if opts.Interval <= 0 {
				return errdefs.Invalid("--interval", "must be positive, got %s", opts.Interval)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return waitRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "Give up after this long, e.g. 90s, 45m, 8h (0: wait forever)")
	cmd.Flags().DurationVar(&opts.Interval, "interval", time.Second, "Time between polls")
	return cmd
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitRun polls until the experiment ends or the timeout passes. One cycle:
//  1. GetExp. A transient error is noted and retried; any other ends the wait.
//  2. A terminal status prints the experiment and returns its outcome.
//  3. Otherwise sleep for the interval, or only what is left of the timeout,
//     and if the timeout has passed print the last experiment seen and fail.
func waitRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	start := opts.Now()
	var (
		last       *falconv1.Experiment
		lastErr    error
		lastStatus string
	)
	for {
		exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
		switch {
		case err == nil:
			last, lastErr = exp, nil
			if exp.GetStatus() != lastStatus && opts.IO.IsStderrTTY() {
				fmt.Fprintf(opts.IO.ErrOut, "%s: %s\n", opts.ID, describe(exp))
			}
			lastStatus = exp.GetStatus()
			if lifecycle.ExperimentMachine.IsTerminal(lifecycle.Status(exp.GetStatus())) {
				return finish(opts, exp)
			}
		case transient(err) && last == nil && opts.Now().Sub(start) >= firstAnswerGrace:
			// Never reached: a wrong --server or no server at all is far
			// likelier than one restarting for this long, and a script
			// should learn it now (exit 6), not at the timeout.
			return err
		case transient(err) && ctx.Err() == nil:
			if lastErr == nil {
				fmt.Fprintf(opts.IO.ErrOut, "Warning: %s; retrying until the timeout\n", status.Convert(err).Message())
			}
			lastErr = err
		default:
			return err
		}

		wait := opts.Interval
		if opts.Timeout > 0 {
			left := opts.Timeout - opts.Now().Sub(start)
			if left <= 0 {
				return timedOut(opts, last, lastErr)
			}
			wait = min(wait, left)
		}
		if err := opts.Sleep(ctx, wait); err != nil {
			return status.FromContextError(err).Err()
		}
	}
}

// firstAnswerGrace is how long wait retries a server that has not answered
// yet: long enough to ride out a restart, short enough that a wrong
// --server fails fast.
const firstAnswerGrace = 10 * time.Second

// transient errors are worth retrying: the server is restarting or slow.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

func describe(exp *falconv1.Experiment) string {
	s := exp.GetStatus()
	if exp.GetReason() != "" {
		s += " (" + exp.GetReason() + ")"
	}
	if exp.GetMessage() != "" {
		s += ": " + exp.GetMessage()
	}
	return s
}

func finish(opts *Options, exp *falconv1.Experiment) error {
	if err := opts.Printer().Print(exp, output.ExperimentDetail(exp)); err != nil {
		return err
	}
	if exp.GetStatus() == string(lifecycle.Succeeded) {
		return nil
	}
	return &factory.ExitError{
		Code: errdefs.ExitNotSucceeded,
		Kind: "NotSucceeded",
		Err:  fmt.Errorf("experiment %s ended %s", exp.GetId(), describe(exp)),
	}
}

// timedOut prints the last experiment seen, so a script still gets its
// state on stdout, and fails with the timeout exit code.
func timedOut(opts *Options, last *falconv1.Experiment, lastErr error) error {
	seen := "never reached the server"
	if last != nil {
		if err := opts.Printer().Print(last, output.ExperimentDetail(last)); err != nil {
			return err
		}
		seen = "last seen status " + describe(last)
	}
	if lastErr != nil {
		seen += "; last error: " + status.Convert(lastErr).Message()
	}
	return &factory.ExitError{
		Code: errdefs.ExitTimeout,
		Kind: "Timeout",
		Err:  fmt.Errorf("timed out after %s waiting for %s to end; %s", opts.Timeout, opts.ID, seen),
	}
}
