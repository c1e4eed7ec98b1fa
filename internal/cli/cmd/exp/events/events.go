package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/expwatch"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon exp events`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	ID       string
	Follow   bool
	AfterSeq int64
	// Sleep waits between reconnections (tests shorten it).
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewCmdEvents builds the command. runF replaces eventsRun in tests.
func NewCmdEvents(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "events ID",
		Short: "Show an experiment's changes, or follow them with -f",
		Long: `Print every change of an experiment and its jobs: status, reason and
message, node pools, TTL warnings and extensions. With -f, keep printing
changes as they happen and exit once the experiment and all its jobs ended;
a server restart only makes it resume after the last event printed.

With -o json each event is one JSON object per line:
  {"seq": 3, "time": "...", "exp_id": "exp-...", "kind": "job", "id": "job-...",
   "status": "Pending", "reason": "Provisioning", "message": "...", "role": "worker"}
kind is "experiment" or "job"; what else the change carried (role,
node_pool, cluster, ttl_left...) comes as more keys. seq numbers the
experiment's events; --after-seq N continues after event N. The server
keeps the newest 1000 events of each experiment.`,
		Example: `  falcon exp events exp-q7odgo8q9x
  falcon exp events exp-q7odgo8q9x -f
  falcon exp events exp-q7odgo8q9x -f -o json | jq -r 'select(.kind == "job") | .status'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.AfterSeq < 0 {
				return errdefs.Invalid("--after-seq", "must not be negative, got %d", opts.AfterSeq)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return eventsRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&opts.Follow, "follow", "f", false, "Keep printing changes until the experiment ends")
	fl.Int64Var(&opts.AfterSeq, "after-seq", 0, "Only events after this seq (the last one seen)")
	return cmd
}

func eventsRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	p := opts.Printer()
	w := bufio.NewWriter(p.Out)
	defer w.Flush()
	watch := &expwatch.Watch{Client: c, ID: opts.ID, AfterSeq: opts.AfterSeq, HistoryOnly: !opts.Follow, Sleep: opts.Sleep}
	if opts.Follow {
		watch.OnBreak = func(err error) {
			_ = w.Flush()
			fmt.Fprintf(opts.IO.ErrOut, "falcon: event stream broke (%s); resuming\n", status.Convert(err).Message())
		}
	}
	err = watch.Run(ctx, func(ev *falconv1.ExpEvent) error {
		if err := WriteEvent(w, p, ev); err != nil {
			return err
		}
		// Followed changes show as they come; history goes out in bulk.
		if opts.Follow {
			return w.Flush()
		}
		return nil
	})
	if ctx.Err() != nil && errdefs.Code(err) == codes.Canceled {
		return nil // interrupted while following: the usual way to stop
	}
	return err
}

// WriteEvent writes one event in p's format, through p's --jq.
func WriteEvent(w *bufio.Writer, p *output.Printer, ev *falconv1.ExpEvent) error {
	if p.Format == output.JSON && p.JQ != nil {
		b, err := JSON(ev)
		if err != nil {
			return err
		}
		return p.JQ.Apply(w, b)
	}
	return Write(w, p.Format, ev)
}

// Write writes one event in format: JSON as one object per line, YAML as
// a document each, -o name the ID of what changed, text as a line for
// people.
func Write(w *bufio.Writer, format output.Format, ev *falconv1.ExpEvent) error {
	switch format {
	case output.JSON:
		b, err := JSON(ev)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		return w.WriteByte('\n')
	case output.Name:
		_, err := w.WriteString(ev.GetId() + "\n")
		return err
	case output.YAML:
		b, err := output.MarshalYAML(ev)
		if err != nil {
			return err
		}
		w.WriteString("---\n")
		_, err = w.Write(b)
		return err
	default:
		_, err := w.WriteString(Line(ev) + "\n")
		return err
	}
}

// core are the keys every event's JSON has, in order.
var core = []string{"seq", "time", "exp_id", "kind", "id", "status", "reason", "message"}

// JSON is the event as one object: the core keys, then the details, each a
// key of its own (sorted), so `jq .node_pool` reads one. A detail that
// would shadow a core key is left out.
func JSON(ev *falconv1.ExpEvent) ([]byte, error) {
	var t string
	if ev.GetTime() != nil {
		t = ev.GetTime().AsTime().UTC().Format(time.RFC3339Nano)
	}
	vals := []any{ev.GetSeq(), t, ev.GetExpId(), ev.GetKind(), ev.GetId(), ev.GetStatus(), ev.GetReason(), ev.GetMessage()}
	var buf bytes.Buffer
	buf.WriteByte('{')
	add := func(k string, v any) error {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(vb)
		return nil
	}
	for i, k := range core {
		if err := add(k, vals[i]); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(ev.GetDetail()))
	for k := range ev.GetDetail() {
		if !isCore(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := add(k, ev.GetDetail()[k]); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func isCore(k string) bool {
	for _, c := range core {
		if c == k {
			return true
		}
	}
	return false
}

// Line is the event as people read it:
//
//	2026-12-01T10:00:03Z  #4  job worker job-ki5t2jegpi  Pending (Provisioning): creating node pool  node_pool=falcon-job-ki5t2jegpi
func Line(ev *falconv1.ExpEvent) string {
	var b strings.Builder
	if ev.GetTime() != nil {
		b.WriteString(ev.GetTime().AsTime().UTC().Format(time.RFC3339))
		b.WriteString("  ")
	}
	b.WriteString("#")
	b.WriteString(strconv.FormatInt(ev.GetSeq(), 10))
	b.WriteString("  ")
	b.WriteString(ev.GetKind())
	d := ev.GetDetail()
	if r := d["role"]; r != "" && ev.GetKind() == "job" {
		b.WriteString(" " + r)
	}
	b.WriteString(" " + ev.GetId() + "  " + ev.GetStatus())
	if ev.GetReason() != "" {
		b.WriteString(" (" + ev.GetReason() + ")")
	}
	if ev.GetMessage() != "" {
		// Whole, on one line: the event is the place to read it.
		b.WriteString(": " + strings.Join(strings.Fields(ev.GetMessage()), " "))
	}
	keys := make([]string, 0, len(d))
	for k := range d {
		if k != "role" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteString(" ")
		}
		b.WriteString(" " + k + "=" + d[k])
	}
	return b.String()
}
