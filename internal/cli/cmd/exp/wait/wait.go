package wait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/expwatch"
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

	IDs      []string
	Any      bool          // --any: the first to end decides; else all must succeed
	Timeout  time.Duration // 0: no limit
	Progress bool          // progress lines on stderr even when it is not a terminal
	// Grace is how long a server that never answered is retried
	// (expwatch.FirstAnswerGrace when 0); Sleep waits between attempts.
	// Tests shorten both.
	Grace time.Duration
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewCmdWait builds the command. runF replaces waitRun in tests.
func NewCmdWait(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	var all bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID [ID...]",
		Short: "Wait for experiments to end",
		Long: fmt.Sprintf(`Wait until experiments end, then print them.

It follows each experiment's event stream, so it returns as soon as the
experiment ends, and a server restart or a dropped connection only makes
it resume after the last event it saw. With several IDs, --all (the
default) returns once every one succeeded, or at once when one ends
without succeeding; --any returns when the first one ends. Each is printed
as it ends (with -o json, one object after another).

--progress prints every change (the experiments' and their jobs' status,
reason and message) to stderr, also when stderr is not a terminal.

Exit codes: 0 when they succeeded (--any: the first to end did), %d when
one failed or was aborted, %d when --timeout passed first (the message
names the last status seen), %d when the server does not answer within
its first 10s. Once it has answered, failures to reach it (a restart) are
retried until the timeout.`, errdefs.ExitNotSucceeded, errdefs.ExitTimeout, errdefs.ExitUnavailable),
		Example: `  falcon exp wait exp-q7odgo8q9x --timeout 8h && falcon exp logs exp-q7odgo8q9x --tail 20
  falcon exp wait exp-q7odgo8q9x exp-1t44htxy4y exp-ki5t2jegpi --all --progress
  falcon exp wait exp-q7odgo8q9x exp-1t44htxy4y --any -o json | jq -r .status`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IDs = args
			if opts.Timeout < 0 {
				return errdefs.Invalid("--timeout", "must not be negative, got %s", opts.Timeout)
			}
			if interval <= 0 {
				return errdefs.Invalid("--interval", "must be positive, got %s", interval)
			}
			if all && opts.Any {
				return errdefs.Invalid("--any", "cannot be combined with --all: wait for every experiment, or for the first")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return waitRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "Give up after this long, e.g. 90s, 45m, 8h (0: wait forever)")
	fl.BoolVar(&all, "all", false, "Return once every experiment succeeded, or at once when one did not (the default)")
	fl.BoolVar(&opts.Any, "any", false, "Return when the first experiment ends; exit 0 if it succeeded")
	fl.BoolVar(&opts.Progress, "progress", false, "Print each change to stderr, even when it is not a terminal")
	// Scripts written when wait polled pass --interval; it is accepted
	// and no longer used, since changes are pushed.
	fl.DurationVar(&interval, "interval", time.Second, "Unused: changes are streamed, not polled")
	_ = fl.MarkHidden("interval")
	return cmd
}

// errTimedOut is the cause of the wait's context when --timeout passes.
var errTimedOut = errors.New("wait timed out")

// outcome is how the watch of one experiment ended.
type outcome struct {
	id  string
	err error // nil: the experiment ended
}

// waiter is the state the watches share: the last change seen of each
// experiment, for progress and for the timeout's message, and stderr.
type waiter struct {
	opts *Options
	mu   sync.Mutex
	last map[string]*falconv1.ExpEvent // the last experiment event of each
	errs map[string]error              // the last break of each, until an event comes
}

// waitRun follows every experiment's event stream at once. One step per
// experiment that ends, in the order they end:
//  1. Read the experiment as it ended and print it.
//  2. --any: return its outcome. --all: a failure returns at once; a
//     success returns once it is the last.
//
// A watch that fails for good (an unknown ID, a server never reached) ends
// the wait with its error; the timeout prints what was last seen of each
// experiment still running and exits with ExitTimeout.
func waitRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	ids := dedupe(opts.IDs)
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if opts.Timeout > 0 {
		var stop context.CancelFunc
		wctx, stop = context.WithTimeoutCause(wctx, opts.Timeout, errTimedOut)
		defer stop()
	}
	w := &waiter{opts: opts, last: map[string]*falconv1.ExpEvent{}, errs: map[string]error{}}
	done := make(chan outcome, len(ids))
	for _, id := range ids {
		go func() {
			watch := &expwatch.Watch{Client: c, ID: id, Grace: opts.Grace, Sleep: opts.Sleep, OnBreak: func(err error) { w.broke(id, err) }}
			err := watch.Run(wctx, func(ev *falconv1.ExpEvent) error { return w.saw(id, ev) })
			if errors.Is(err, errExpEnded) {
				err = nil
			}
			done <- outcome{id, err}
		}()
	}
	left := len(ids)
	for left > 0 {
		o := <-done
		left--
		if o.err != nil {
			if errors.Is(context.Cause(wctx), errTimedOut) {
				return w.timedOut(ctx, c, ids)
			}
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return o.err
		}
		exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: o.id})
		if err != nil {
			return err
		}
		if err := opts.Printer().Print(exp, output.ExperimentDetail(exp)); err != nil {
			return err
		}
		succeeded := exp.GetStatus() == string(lifecycle.Succeeded)
		if opts.Any || !succeeded {
			return result(exp)
		}
	}
	return nil
}

// errExpEnded stops a watch once its experiment's status is terminal: the
// wait need not see its jobs' last moves.
var errExpEnded = errors.New("experiment ended")

// saw handles one event of experiment id.
func (w *waiter) saw(id string, ev *falconv1.ExpEvent) error {
	w.mu.Lock()
	delete(w.errs, id)
	if ev.GetKind() == "experiment" {
		w.last[id] = ev
	}
	w.mu.Unlock()
	if w.opts.Progress || w.opts.IO.IsStderrTTY() {
		w.note("%s\n", progressLine(id, ev))
	}
	if ev.GetKind() == "experiment" && lifecycle.ExperimentMachine.IsTerminal(lifecycle.Status(ev.GetStatus())) {
		return errExpEnded
	}
	return nil
}

// broke warns once per streak of breaks of an experiment's stream.
func (w *waiter) broke(id string, err error) {
	w.mu.Lock()
	_, warned := w.errs[id]
	w.errs[id] = err
	w.mu.Unlock()
	if !warned {
		w.note("Warning: %s: %s; resuming until the timeout\n", id, status.Convert(err).Message())
	}
}

func (w *waiter) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.opts.IO.ErrOut, format, args...)
}

// progressLine is one change as people read it: "exp-1: Running",
// "exp-1 worker job-2: Pending (Waiting): position 3 of 5".
func progressLine(id string, ev *falconv1.ExpEvent) string {
	who := id
	if ev.GetKind() == "job" {
		who = strings.TrimSpace(id + " " + ev.GetDetail()["role"] + " " + ev.GetId())
	}
	return who + ": " + describe(ev.GetStatus(), ev.GetReason(), ev.GetMessage())
}

func describe(st, reason, message string) string {
	if reason != "" {
		st += " (" + reason + ")"
	}
	if message != "" {
		st += ": " + message
	}
	return st
}

// result is the outcome of an experiment that ended.
func result(exp *falconv1.Experiment) error {
	if exp.GetStatus() == string(lifecycle.Succeeded) {
		return nil
	}
	return &factory.ExitError{
		Code: errdefs.ExitNotSucceeded,
		Kind: "NotSucceeded",
		Err:  fmt.Errorf("experiment %s ended %s", exp.GetId(), describe(exp.GetStatus(), exp.GetReason(), exp.GetMessage())),
	}
}

// timedOut prints the experiments still running as they are now, so a
// script still gets their state on stdout, and fails with the timeout
// exit code naming the last status seen of each.
func (w *waiter) timedOut(ctx context.Context, c *client.Client, ids []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var seen []string
	for _, id := range ids {
		ev, ok := w.last[id]
		if ok && lifecycle.ExperimentMachine.IsTerminal(lifecycle.Status(ev.GetStatus())) {
			continue // ended and already printed
		}
		s := "never reached the server"
		if ok {
			s = "last seen status " + describe(ev.GetStatus(), ev.GetReason(), ev.GetMessage())
		}
		// The experiment as it is now, when the server answers: printed
		// for the script, and the freshest status for the message.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		exp, err := c.GetExp(rctx, &falconv1.GetExpRequest{Id: id})
		cancel()
		if err == nil {
			if err := w.opts.Printer().Print(exp, output.ExperimentDetail(exp)); err != nil {
				return err
			}
			s = "last seen status " + describe(exp.GetStatus(), exp.GetReason(), exp.GetMessage())
		}
		if len(ids) > 1 {
			s = id + ": " + s
		}
		if err := w.errs[id]; err != nil {
			s += "; last error: " + status.Convert(err).Message()
		}
		seen = append(seen, s)
	}
	what := ids[0]
	if len(ids) > 1 {
		what = fmt.Sprintf("%d experiments", len(ids))
	}
	return &factory.ExitError{
		Code: errdefs.ExitTimeout,
		Kind: "Timeout",
		Err:  fmt.Errorf("timed out after %s waiting for %s to end; %s", w.opts.Timeout, what, strings.Join(seen, "; ")),
	}
}

func dedupe(ids []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
