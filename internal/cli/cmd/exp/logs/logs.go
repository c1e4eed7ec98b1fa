package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp logs`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID     string
	Role   string
	Rank   *int32 // nil: every rank
	Tail   int32
	Follow bool
}

// NewCmdLogs builds the command. runF replaces logsRun in tests.
func NewCmdLogs(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	var (
		rank      int32
		container string
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print or follow an experiment's logs",
		Long: `Print the logs of an experiment's pods, or follow them with -f.

When the experiment has more than one pod (several roles or replicas) each
line is prefixed with [role/rank]. With -o json every line is one JSON
object (job_id, role, rank, pod, line) per output line, ready for jq.`,
		Example: `  falcon exp logs exp-q7odgo8q9x --tail 100
  falcon exp logs exp-q7odgo8q9x --role worker --rank 0 -f
  falcon exp logs exp-q7odgo8q9x -o json | jq -r 'select(.rank == 0) | .line'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if cmd.Flags().Changed("rank") {
				if rank < 0 {
					return errdefs.Invalid("--rank", "must not be negative, got %d", rank)
				}
				opts.Rank = &rank
			}
			if opts.Tail < 0 {
				return errdefs.Invalid("--tail", "must not be negative, got %d", opts.Tail)
			}
			// Scripts written for the previous CLI pass --container task;
			// a job has only that container.
			if container != "" && container != "task" {
				return errdefs.Invalid("--container", "a job has only the container \"task\", got %q", container)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return logsRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Role, "role", "", "Only this role's pods")
	fl.Int32Var(&rank, "rank", 0, "Only this rank (default: every rank)")
	fl.Int32Var(&opts.Tail, "tail", 0, "Only the last N lines of each pod (0: all)")
	fl.BoolVarP(&opts.Follow, "follow", "f", false, "Keep streaming new lines until interrupted or the experiment ends")
	fl.StringVarP(&container, "container", "c", "", "Container name; only \"task\" exists")
	_ = fl.MarkHidden("container")
	return cmd
}

func logsRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	// The experiment says how many pods the lines can come from; asking
	// first also turns a wrong ID into a plain NotFound before any output.
	exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
	if err != nil {
		return err
	}
	prefix := podCount(exp, opts.Role, opts.Rank) > 1

	stream, err := c.GetExpLogs(ctx, &falconv1.GetExpLogsRequest{
		Id:     opts.ID,
		Role:   opts.Role,
		Rank:   opts.Rank,
		Tail:   opts.Tail,
		Follow: opts.Follow,
	})
	if err != nil {
		return err
	}
	defer stream.Close()
	p := opts.Printer()
	for {
		line, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				// Interrupted (Ctrl-C while following): the usual way to stop.
				return nil
			}
			return err
		}
		if err := p.PrintItem(line, textLine(line, prefix)); err != nil {
			return err
		}
	}
}

func textLine(l *falconv1.LogLine, prefix bool) output.TableFunc {
	return func(v output.View) error {
		text := strings.TrimSuffix(l.GetLine(), "\n")
		if prefix {
			_, err := fmt.Fprintf(v.Out, "[%s/%d] %s\n", l.GetRole(), l.GetRank(), text)
			return err
		}
		_, err := fmt.Fprintln(v.Out, text)
		return err
	}
}

// podCount is how many pods the selected logs come from: one per replica of
// each selected role, or one per role when a rank is chosen.
func podCount(exp *falconv1.Experiment, role string, rank *int32) int {
	n := 0
	for name, spec := range exp.GetRoleToTaskSpec() {
		if role != "" && name != role {
			continue
		}
		replicas := max(int(spec.GetReplica()), 1)
		switch {
		case rank == nil:
			n += replicas
		case int(*rank) < replicas:
			n++
		}
	}
	return n
}
