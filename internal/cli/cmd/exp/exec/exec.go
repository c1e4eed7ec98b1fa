package exec

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
)

// Options are the inputs of `falcon exp exec`.
type Options struct {
	IO     *iostreams.IOStreams
	Client func() (*client.Client, error)

	ID     string
	Role   string
	Rank   int32
	Stdin  bool
	TTY    bool
	NoWait bool
	// AllRanks runs the command in every rank of the role (every role's
	// without one) at once.
	AllRanks bool
	Command  []string
}

// NewCmdExec builds the command. runF replaces execRun in tests.
func NewCmdExec(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "exec ID [--role R] [--rank N | --all-ranks] [-i] [-t] [--no-wait] -- COMMAND [ARG...]",
		Short: "Run a command in a rank of a running experiment",
		Long: `Run a command in one rank of a running experiment: in the task container
of the rank's pod on Kubernetes and GKE, beside the rank's process (same
environment, working directory and FALCON_ARTIFACT_DIR) on falcon dev.
The command is run as given, not through a shell: write sh -c '...' for one.

Without --rank it is rank 0; without --role the experiment's only role. The
command's stdout and stderr come back apart and whole, and its exit code is
this command's (128+N for a command killed by signal N). -i sends stdin,
-t runs it on a terminal.

--all-ranks runs the command in every rank of the role (of every role
without --role) at once, as pdsh does on hosts: each line of output starts
with "[ROLE/N] ", as exp logs marks its lines, stdout and stderr still
apart, and the exit code is that of the first rank that failed (by role,
then rank; 0 when every rank exited 0), each failure said on stderr.

An experiment that does not run yet is waited for, saying so on stderr;
--no-wait fails at once instead (exit 4). An experiment that has ended
cannot be entered (exit 4): its files are kept, see falcon artifact get.
Only the experiment's creator or an admin may exec; every session is in
the audit log.`,
		Example: `  falcon exp exec exp-q7odgo8q9x -- nvidia-smi
  falcon exp exec exp-q7odgo8q9x --rank 1 -- sh -c 'ls -l $FALCON_ARTIFACT_DIR'
  falcon exp exec exp-q7odgo8q9x -it -- bash
  falcon exp exec exp-q7odgo8q9x --all-ranks -- sh -c 'hostname; df -h /tmp | tail -1'
  falcon exp exec exp-q7odgo8q9x -i -- sh -c 'cat > /tmp/cfg.yaml' < cfg.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if dash := cmd.ArgsLenAtDash(); dash > 1 {
				return errdefs.Invalid("arguments", "one experiment ID before --, got %d: %q", dash, args[:dash])
			}
			opts.Command = args[1:]
			if len(opts.Command) == 0 {
				return errdefs.Invalid("command", "name the command to run after --, e.g. falcon exp exec %s -- nvidia-smi", opts.ID)
			}
			if opts.Rank < 0 {
				return errdefs.Invalid("--rank", "must not be negative, got %d", opts.Rank)
			}
			if opts.AllRanks {
				switch {
				case cmd.Flags().Changed("rank"):
					return errdefs.Invalid("--all-ranks", "runs the command in every rank; drop --rank %d", opts.Rank)
				case opts.TTY:
					return errdefs.Invalid("--all-ranks", "cannot give several ranks one terminal; drop -t, or name one rank with --rank")
				case opts.Stdin:
					return errdefs.Invalid("--all-ranks", "cannot send one stdin to several ranks; drop -i, or name one rank with --rank")
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			if opts.AllRanks {
				return execAll(cmd.Context(), opts)
			}
			return execRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Role, "role", "", "The role (required when the experiment has several)")
	fl.Int32Var(&opts.Rank, "rank", 0, "The rank")
	fl.BoolVarP(&opts.Stdin, "stdin", "i", false, "Send stdin to the command")
	fl.BoolVarP(&opts.TTY, "tty", "t", false, "Run the command on a terminal")
	fl.BoolVar(&opts.NoWait, "no-wait", false, "Fail at once if the rank does not run yet, instead of waiting")
	fl.BoolVar(&opts.AllRanks, "all-ranks", false, "Run the command in every rank of the role (every role's without --role) at once, each output line after [ROLE/N]")
	return cmd
}

func execRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	start := &falconv1.ExecStart{
		ExpId: opts.ID, Role: opts.Role, Rank: opts.Rank, Command: opts.Command,
		Stdin: opts.Stdin, Tty: opts.TTY, NoWait: opts.NoWait,
	}
	eio := client.ExecIO{
		Stdout: opts.IO.Out, Stderr: opts.IO.ErrOut,
		Notice: func(m string) { fmt.Fprintf(opts.IO.ErrOut, "falcon: %s\n", m) },
	}
	if opts.Stdin {
		eio.Stdin = opts.IO.In
	}
	if opts.TTY {
		resize, size := terminalSize(ctx, opts.IO)
		start.TerminalSize, eio.Resize = size, resize
		// The local terminal turns raw only once the command starts: while
		// the rank is waited for, Ctrl-C is still a signal that ends the
		// wait, not a byte for a command that does not run yet.
		restore := func() {}
		defer func() { restore() }()
		eio.Started = func(*falconv1.ExecStarted) {
			if opts.Stdin {
				restore = rawMode(opts.IO)
			}
		}
	}
	exit, err := c.Exec(ctx, start, eio)
	if err != nil {
		return err
	}
	if exit.GetCode() != 0 {
		err := fmt.Errorf("command exited with code %d", exit.GetCode())
		if exit.GetSignal() > 0 {
			err = fmt.Errorf("command killed by signal %d (%v)", exit.GetSignal(), syscall.Signal(exit.GetSignal()))
		}
		// The command has said what went wrong on its own stderr; the
		// code is the answer.
		return &factory.ExitError{Code: int(exit.GetCode()), Kind: "CommandExited", Err: err, Quiet: true}
	}
	return nil
}

// rawMode puts the local terminal in raw mode when stdin is one, so that
// keys, Ctrl-C included, reach the command; it returns the undoing.
func rawMode(ios *iostreams.IOStreams) (restore func()) {
	if in, ok := ios.In.(*os.File); ok && ios.IsStdinTTY() {
		if st, err := term.MakeRaw(int(in.Fd())); err == nil {
			return func() { _ = term.Restore(int(in.Fd()), st) }
		}
	}
	return func() {}
}

// terminalSize is -t's terminal size when stdout is one: now, and on every
// SIGWINCH until ctx ends.
func terminalSize(ctx context.Context, ios *iostreams.IOStreams) (resize <-chan *falconv1.TerminalSize, size *falconv1.TerminalSize) {
	out, ok := ios.Out.(*os.File)
	if !ok || !ios.IsStdoutTTY() {
		return nil, nil
	}
	get := func() *falconv1.TerminalSize {
		w, h, err := term.GetSize(int(out.Fd()))
		if err != nil {
			return nil
		}
		return &falconv1.TerminalSize{Width: uint32(w), Height: uint32(h)}
	}
	ch := make(chan *falconv1.TerminalSize, 1)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				if sz := get(); sz != nil {
					select {
					case ch <- sz:
					default:
					}
				}
			}
		}
	}()
	return ch, get()
}
