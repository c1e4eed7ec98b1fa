package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/cmd/exp/logs/export"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/cli/since"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/logjson"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/placement"
)

// Options are the inputs of `falcon exp logs`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID         string
	Role       string
	Rank       *int32 // nil: every rank
	Tail       int32
	Follow     bool
	Since      time.Time // zero: from the start
	Grep       string
	Timestamps bool
	// Now is the clock --since durations count back from.
	Now func() time.Time
}

// NewCmdLogs builds the command. runF replaces logsRun in tests.
func NewCmdLogs(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer, Now: f.Clock()}
	var (
		rank      int32
		container string
		sinceFlag string
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
			if sinceFlag != "" {
				t, err := since.Parse(sinceFlag, opts.Now())
				if err != nil {
					return err
				}
				opts.Since = t
			}
			if opts.Grep != "" {
				if _, err := regexp.Compile(opts.Grep); err != nil {
					return errdefs.Invalid("--grep", "%q is not an RE2 expression: %v", opts.Grep, err)
				}
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
	cmd.AddCommand(export.NewCmdExport(f, nil))
	fl := cmd.Flags()
	fl.StringVar(&opts.Role, "role", "", "Only this role's pods")
	fl.Int32Var(&rank, "rank", 0, "Only this rank (default: every rank)")
	fl.Int32Var(&opts.Tail, "tail", 0, "Only the last N lines of each pod (0: all)")
	fl.BoolVarP(&opts.Follow, "follow", "f", false, "Keep streaming new lines until interrupted or the experiment ends")
	fl.StringVar(&sinceFlag, "since", "", "Only lines logged since then: a duration (10m, 2h, 7d) or a time (RFC 3339)")
	fl.StringVar(&opts.Grep, "grep", "", "Only lines matching this RE2 expression (matched by the server)")
	fl.BoolVar(&opts.Timestamps, "timestamps", false, "Prefix each line with the time it was logged, where the source records it")
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

	req := &falconv1.GetExpLogsRequest{
		Id:     opts.ID,
		Role:   opts.Role,
		Rank:   opts.Rank,
		Tail:   opts.Tail,
		Follow: opts.Follow,
		Grep:   opts.Grep,
	}
	if !opts.Since.IsZero() {
		req.Since = timestamppb.New(opts.Since)
	}
	p := opts.Printer()
	if p.Format == output.Name {
		return output.NoNames()
	}
	// A followed stream that breaks (the server restarted, a proxy cut an
	// idle connection) is opened again after the last line received, by its
	// resume token, so no line is lost or printed twice; before any line
	// (no token yet) the same request is simply made again. Every server
	// issues tokens, falcon dev's included (byte offsets in its log files,
	// which outlive it).
	for attempt := 0; ; {
		stream, err := c.GetExpLogs(ctx, req)
		if err != nil {
			if retry := opts.Follow && resumable(err) && ctx.Err() == nil && attempt < maxReconnects; retry {
				attempt++
				if !sleep(ctx, reconnectDelay(attempt)) {
					return nil
				}
				continue
			}
			return err
		}
		before := req.Resume
		err = printStream(ctx, stream, p, prefix, opts.Timestamps, req)
		stream.Close()
		if err == nil || ctx.Err() != nil {
			// Done, or interrupted (Ctrl-C while following): the usual way to stop.
			return nil
		}
		if !opts.Follow || !resumable(err) || attempt >= maxReconnects {
			return err
		}
		if req.Resume != before {
			attempt = 0 // it delivered lines: only breaks in a row count
		}
		attempt++
		fmt.Fprintf(opts.IO.ErrOut, "falcon: log stream broke (%v); resuming\n", err)
		if !sleep(ctx, reconnectDelay(attempt)) {
			return nil
		}
	}
}

// resumable errors end a stream the server did not mean to end: it is
// unreachable or restarting, or stopped the stream as it shut down (the
// gateway's connection closing reaches the client as Canceled).
func resumable(err error) bool {
	switch errdefs.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.Aborted:
		return true
	}
	return false
}

// maxReconnects bounds how often one `logs -f` resumes a broken stream.
const maxReconnects = 30

func reconnectDelay(attempt int) time.Duration {
	return min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// printStream prints lines until the stream ends (nil) or breaks, keeping
// the last line's resume token in req. Output is buffered and flushed
// whenever the stream has nothing more at hand, so a followed log shows
// each line as it comes and a long one is not written a line per system
// call. JSON lines are written by logjson, not protojson: a 1 GiB log is
// ten million of them.
func printStream(ctx context.Context, stream *client.LogStream, p *output.Printer, prefix, stamps bool, req *falconv1.GetExpLogsRequest) error {
	w := bufio.NewWriterSize(p.Out, 256<<10)
	defer w.Flush()
	buffered := *p
	buffered.Out = w
	var buf []byte
	for {
		line, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if line.GetResume() != "" {
			req.Resume = line.GetResume()
			req.Tail = 0 // a resumed read continues; it does not tail again
		}
		switch p.Format {
		case output.JSON:
			buf = append(logjson.AppendLine(buf[:0], line), '\n')
			err = p.WriteJSON(w, buf)
		case output.YAML:
			err = buffered.PrintItem(line, nil)
		default:
			err = writeText(w, line, prefix, stamps)
		}
		if err != nil {
			return err
		}
		if stream.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// writeText writes one line as people read it: [role/rank] when the lines
// come from several pods, the time when asked.
func writeText(w *bufio.Writer, l *falconv1.LogLine, prefix, stamps bool) error {
	if prefix {
		w.WriteByte('[')
		w.WriteString(l.GetRole())
		w.WriteByte('/')
		w.WriteString(strconv.Itoa(int(l.GetRank())))
		w.WriteString("] ")
	}
	if stamps && l.GetTime() != nil {
		w.WriteString(l.GetTime().AsTime().UTC().Format(time.RFC3339Nano))
		w.WriteByte(' ')
	}
	w.WriteString(strings.TrimSuffix(l.GetLine(), "\n"))
	return w.WriteByte('\n')
}

// podCount is how many pods the selected logs come from: one per replica of
// each selected role, or one per role when a rank is chosen.
func podCount(exp *falconv1.Experiment, role string, rank *int32) int {
	n := 0
	for name, spec := range exp.GetRoleToTaskSpec() {
		if role != "" && name != role {
			continue
		}
		replicas := max(placement.Ranks(spec), 1)
		switch {
		case rank == nil:
			n += replicas
		case int(*rank) < replicas:
			n++
		}
	}
	return n
}
