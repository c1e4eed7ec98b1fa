package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/placement"
)

const (
	defaultTail = 100
	maxTail     = 2000
	filesPage   = 100
	// maxCharts bounds the charts of one page; the rest of the metrics
	// are still in the summary table.
	maxCharts = 24
)

// expView is one experiment's page. The parts other than the experiment
// itself fail alone: a log that cannot be read yet shows why, beside the
// rest.
type expView struct {
	Exp      *falconv1.Experiment
	Terminal []string // experiment statuses that end it
	JobEnds  []string // job statuses that end a job

	Events    []*falconv1.ExpEvent // newest first
	LastSeq   int64
	EventsErr string

	Logs    logTail
	Files   []*falconv1.ArtifactFile
	FilesOK bool // the listing holds every file (the experiment ended)
	// FilesNext is the URL of the next page of files; FilesErr why there
	// is no listing.
	FilesNext, FilesErr string

	Metrics    *falconv1.ExpMetrics
	Charts     []chart
	MetricsErr string
}

// logTail is the log section: which ranks, how many lines, and what came.
type logTail struct {
	Role  string
	Rank  int32
	Tail  int
	Roles []string
	Ranks []int32
	Lines []*falconv1.LogLine
	Err   string
}

func (h *Handler) expPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	lt := logTail{Role: query(r, "role"), Tail: defaultTail}
	if s := query(r, "rank"); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			h.fail(w, r, badRequest("rank", "%q must be a rank: 0 or more", s))
			return
		}
		lt.Rank = int32(n)
	}
	if s := query(r, "tail"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxTail {
			h.fail(w, r, badRequest("tail", "%q must be a number of lines from 1 to %d", s, maxTail))
			return
		}
		lt.Tail = n
	}
	ctx := h.call(r)
	// The experiment first: an unknown ID (or a caller the API refuses)
	// is the whole answer.
	exp, err := h.exps.GetExp(ctx, &falconv1.GetExpRequest{Id: id})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := expView{Exp: exp, Terminal: statusNames(lifecycle.ExperimentMachine.Terminal),
		JobEnds: statusNames(lifecycle.JobMachine.Terminal)}
	for _, role := range sortedKeys(exp.GetRoleToTaskSpec()) {
		lt.Roles = append(lt.Roles, role)
		if lt.Role == "" || lt.Role == role {
			for i := range int32(max(placement.Ranks(exp.GetRoleToTaskSpec()[role]), 1)) {
				if !slices.Contains(lt.Ranks, i) {
					lt.Ranks = append(lt.Ranks, i)
				}
			}
		}
	}
	v.Logs = lt

	var g errgroup.Group
	g.Go(func() error { h.readEvents(ctx, &v); return nil })
	g.Go(func() error { h.readLogs(ctx, &v); return nil })
	g.Go(func() error { h.readFiles(ctx, r, &v); return nil })
	g.Go(func() error { h.readMetrics(ctx, &v); return nil })
	_ = g.Wait()
	h.render(w, r, http.StatusOK, "exp.html", page{Title: exp.GetName(), Nav: "experiments", Data: v})
}

// readEvents reads the history WatchExp keeps (the newest 1000 events).
func (h *Handler) readEvents(ctx context.Context, v *expView) {
	stream, err := h.exps.WatchExp(ctx, &falconv1.WatchExpRequest{Id: v.Exp.GetId(), HistoryOnly: true})
	if err != nil {
		v.EventsErr = message(err)
		return
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			v.EventsErr = message(err)
			break
		}
		v.LastSeq = max(v.LastSeq, ev.GetSeq())
		if ev.GetKind() != "" {
			v.Events = append(v.Events, ev)
		}
	}
	slices.Reverse(v.Events)
}

func (h *Handler) readLogs(ctx context.Context, v *expView) {
	lt := &v.Logs
	req := &falconv1.GetExpLogsRequest{Id: v.Exp.GetId(), Role: lt.Role, Rank: proto.Int32(lt.Rank), Tail: int32(lt.Tail)}
	stream, err := h.exps.GetExpLogs(ctx, req)
	if err != nil {
		lt.Err = message(err)
		return
	}
	for {
		batch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			lt.Err = message(err)
			return
		}
		lt.Lines = append(lt.Lines, batch.GetLines()...)
	}
}

func (h *Handler) readFiles(ctx context.Context, r *http.Request, v *expView) {
	resp, err := h.arts.ListArtifactFiles(ctx, &falconv1.ListArtifactFilesRequest{
		ExpId: v.Exp.GetId(), PageSize: filesPage, PageToken: query(r, "files"),
	})
	if err != nil {
		v.FilesErr = message(err)
		return
	}
	v.Files, v.FilesOK = resp.GetItems(), resp.GetComplete()
	if t := resp.GetNextPageToken(); t != "" {
		q := r.URL.Query()
		q.Set("files", t)
		v.FilesNext = r.URL.Path + "?" + q.Encode() + "#artifacts"
	}
}

// readMetrics reads the summaries, then the points of the charted ones.
func (h *Handler) readMetrics(ctx context.Context, v *expView) {
	id := v.Exp.GetId()
	m, err := h.exps.GetExpMetrics(ctx, &falconv1.GetExpMetricsRequest{Id: id})
	if err != nil {
		v.MetricsErr = message(err)
		return
	}
	v.Metrics = m
	var names []string
	for _, s := range m.GetMetrics() {
		if len(names) < maxCharts {
			names = append(names, s.GetName())
		}
	}
	if len(names) == 0 {
		return
	}
	pts, err := h.exps.GetExpMetrics(ctx, &falconv1.GetExpMetricsRequest{Id: id, Series: names})
	if err != nil {
		v.MetricsErr = message(err)
		return
	}
	for _, s := range pts.GetSeries() {
		v.Charts = append(v.Charts, newChart(s.GetName(), []chartLine{{Label: id, Points: s.GetPoints()}}))
	}
}

// message is what a failed call says, without the gRPC decoration.
func message(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
