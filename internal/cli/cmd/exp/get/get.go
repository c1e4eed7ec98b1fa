package get

import (
	"bytes"
	"context"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/expwatch"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp get`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID    string
	Watch bool
	// Sleep waits between reconnections while watching (tests shorten it).
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewCmdGet builds the command. runF replaces getRun in tests.
func NewCmdGet(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "get ID",
		Aliases: []string{"show", "describe"},
		Short:   "Show an experiment with its jobs and artifact",
		Long: `Show an experiment with its jobs and artifact.

With -w, print it again on every change of it or its jobs, until it and
all its jobs ended; with -o json each is one JSON object on a line of its
own, so a script can read them as they come.`,
		Example: `  falcon exp get exp-q7odgo8q9x
  falcon exp get exp-q7odgo8q9x -o json | jq -r .status
  falcon exp get exp-q7odgo8q9x -w -o json | jq -r '.status + " " + (.jobs[0].reason)'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return getRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Watch, "watch", "w", false, "Print the experiment again on every change, until it ends")
	return cmd
}

func getRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	p := opts.Printer()
	if !opts.Watch {
		exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
		if err != nil {
			return err
		}
		return p.Print(exp, output.ExperimentDetail(exp))
	}
	// The watch starts after the newest event seen before the first read:
	// the experiment as read shows at least what every event up to there
	// did. An event written after it is replayed and, when the read
	// already showed its change, prints nothing.
	after := latestSeq(ctx, c, opts.ID)
	exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
	if err != nil {
		return err
	}
	last, err := print(p, exp, nil)
	if err != nil {
		return err
	}
	watch := &expwatch.Watch{Client: c, ID: opts.ID, AfterSeq: after, Sleep: opts.Sleep}
	err = watch.Run(ctx, func(*falconv1.ExpEvent) error {
		exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
		if err != nil {
			return err
		}
		last, err = print(p, exp, last)
		return err
	})
	if ctx.Err() != nil && errdefs.Code(err) == codes.Canceled {
		return nil // interrupted: the usual way to stop watching
	}
	return err
}

// print prints exp unless it reads exactly as the last one printed (two
// events, one read), and returns what it printed.
func print(p *output.Printer, exp *falconv1.Experiment, last []byte) ([]byte, error) {
	b, err := output.MarshalCompactJSON(exp)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(b, last) {
		return last, nil
	}
	switch p.Format {
	case output.JSON:
		err = p.WriteJSON(p.Out, append(b, '\n'))
	case output.Name:
		err = output.WriteNames(p.Out, exp)
	case output.YAML:
		err = p.PrintItem(exp, nil)
	default:
		if last != nil {
			if _, err := p.Out.Write([]byte("\n")); err != nil {
				return nil, err
			}
		}
		err = p.Print(exp, output.ExperimentDetail(exp))
	}
	return b, err
}

// latestSeq is the seq of the experiment's newest event: the history, up to
// there, is what the read shows. 0 when it cannot be read (the watch then
// replays the history, printing the experiment once more at most).
func latestSeq(ctx context.Context, c *client.Client, id string) int64 {
	s, err := c.WatchExp(ctx, &falconv1.WatchExpRequest{Id: id, HistoryOnly: true})
	if err != nil {
		return 0
	}
	defer s.Close()
	var last int64
	for {
		ev, err := s.Recv()
		if err != nil {
			return last
		}
		last = max(last, ev.GetSeq())
	}
}
