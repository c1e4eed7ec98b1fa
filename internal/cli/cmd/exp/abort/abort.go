package abort

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp abort`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	IDs    []string
	Reason string
	Yes    bool
	Force  bool
}

// NewCmdAbort builds the command. runF replaces abortRun in tests.
func NewCmdAbort(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "abort ID [ID...]",
		Aliases: []string{"stop", "cancel"},
		Short:   "Abort experiments",
		Long: `Abort experiments: their jobs are stopped and their slices released.

Asks for confirmation on a terminal; without a terminal (scripts, agents)
--yes is required. An experiment that already ended is left as it is and
reported as unchanged, which is not an error. With several IDs every one is
tried; the exit code is the worst (highest) of their results. Each ID
prints its AbortExpResponse (experiment, changed, message); with several
IDs, -o json prints one object per line and -o yaml one document each
(separated by ---), so every answer parses on its own. Failures go to
stderr.

--force ends the experiments and their jobs at once, Aborted, without
waiting for the clusters to confirm that they stopped: for a cluster that
can no longer be reached, or an abort that stays Aborting. The controller
goes on asking each cluster to stop what the jobs started, with backoff,
until it confirms; until then pods, processes or node pools may keep
running (and costing), and each job's message says so. It also ends an experiment that is already aborting. Who
may force is who may abort: the experiment's creator or an admin.`,
		Example: `  falcon exp abort exp-q7odgo8q9x --reason 'wrong image' --yes
  falcon exp abort exp-q7odgo8q9x --force --reason 'cluster deleted' --yes`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.IDs = args
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return abortRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "Why, recorded on the experiment")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "End the experiments and their jobs now, without waiting for the clusters to stop them (what they started may run until a cluster confirms the stop)")
	return cmd
}

func abortRun(ctx context.Context, opts *Options) error {
	question := fmt.Sprintf("Abort %s?", strings.Join(opts.IDs, ", "))
	if opts.Force {
		question = fmt.Sprintf("Force-abort %s? Falcon will not wait for the clusters to stop them, and what they started may keep running until they confirm the stop.", strings.Join(opts.IDs, ", "))
	}
	ok, err := factory.ConfirmOrRequireYes(opts.IO, opts.Yes, question)
	if err != nil {
		return err
	}
	if !ok {
		return factory.Declined("nothing was aborted")
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	p := opts.Printer()
	var (
		failed []string
		worst  *factory.ExitError
	)
	for _, id := range opts.IDs {
		resp, err := c.AbortExp(ctx, &falconv1.AbortExpRequest{Id: id, Reason: opts.Reason, Force: opts.Force})
		if err != nil {
			if len(opts.IDs) == 1 {
				return err
			}
			st := status.Convert(err)
			fmt.Fprintf(opts.IO.ErrOut, "Error: %s: %s\n", id, st.Message())
			failed = append(failed, id)
			if code := errdefs.ExitCode(st.Code()); worst == nil || code > worst.Code {
				worst = &factory.ExitError{Code: code, Kind: st.Code().String()}
			}
			continue
		}
		// Several answers are a stream: one JSON object per line, or YAML
		// documents separated by ---, so each parses on its own.
		print := p.Print
		if len(opts.IDs) > 1 {
			print = p.PrintItem
		}
		if err := print(resp, abortView(id, resp, opts.Force)); err != nil {
			return err
		}
	}
	if worst != nil {
		worst.Err = fmt.Errorf("could not abort %d of %d experiments: %s", len(failed), len(opts.IDs), strings.Join(failed, ", "))
		return worst
	}
	return nil
}

func abortView(id string, resp *falconv1.AbortExpResponse, force bool) output.TableFunc {
	return func(v output.View) error {
		exp := resp.GetExperiment()
		if resp.GetChanged() && force {
			_, err := fmt.Fprintf(v.Out, "%s: force-aborted (%s); its clusters have not confirmed the stop, so what they started may run until they do (the controller keeps asking)\n", id, exp.GetStatus())
			return err
		}
		if resp.GetChanged() {
			_, err := fmt.Fprintf(v.Out, "%s: aborting (%s)\n", id, exp.GetStatus())
			return err
		}
		msg := resp.GetMessage()
		if msg == "" {
			msg = "experiment is already " + exp.GetStatus()
		}
		_, err := fmt.Fprintf(v.Out, "%s: nothing changed: %s\n", id, msg)
		return err
	}
}
