package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// maxLive bounds the experiments one live list follows: a page holds at
// most maxLimit rows, and only those still running are followed.
const maxLive = maxLimit

// sse writes server-sent events. Every event is flushed at once: the
// stream exists to be seen as it happens.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx-style proxies would hold it back
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// send writes one event; id (when not empty) is what the browser sends
// back as Last-Event-ID when it reconnects.
func (s *sse) send(event, id string, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var b strings.Builder
	if id != "" {
		fmt.Fprintf(&b, "id: %s\n", id)
	}
	fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", event, raw)
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return err
	}
	return s.rc.Flush()
}

// ping is a comment, which EventSource ignores: it keeps proxies from
// closing a quiet stream.
func (s *sse) ping() error {
	if _, err := io.WriteString(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// change is what the pages are told of an experiment or a job: the same
// fields as `falcon exp events -o json`.
type change struct {
	Seq      int64             `json:"seq,omitempty"`
	Time     string            `json:"time,omitempty"`
	Kind     string            `json:"kind"`
	ID       string            `json:"id"`
	Status   string            `json:"status"`
	Reason   string            `json:"reason"`
	Message  string            `json:"message"`
	Detail   map[string]string `json:"detail,omitempty"`
	Terminal bool              `json:"terminal,omitempty"`
	Version  int32             `json:"version,omitempty"`
	Gone     bool              `json:"gone,omitempty"` // deleted
}

// expLive relays WatchExp for the experiment page: each event as a
// "change", then "end" once the experiment and its jobs have ended. The
// page passes the seq it rendered up to (after); a reconnecting browser
// passes the last it received as Last-Event-ID, so nothing is missed or
// shown twice.
func (h *Handler) expLive(w http.ResponseWriter, r *http.Request) {
	r, done := h.stream(r)
	defer done()
	id := r.PathValue("id")
	after := int64(0)
	for _, in := range [][2]string{{"after", query(r, "after")}, {"Last-Event-ID", strings.TrimSpace(r.Header.Get("Last-Event-ID"))}} {
		if in[1] == "" {
			continue
		}
		n, err := strconv.ParseInt(in[1], 10, 64)
		if err != nil || n < 0 {
			h.fail(w, r, badRequest(in[0], "%q must be an event seq: 0 or more", in[1]))
			return
		}
		after = max(after, n)
	}
	ctx := h.call(r)
	// Checked before the stream's headers, so an unknown experiment or a
	// refused caller is an HTTP status, which EventSource does not retry.
	if _, err := h.exps.GetExp(ctx, &falconv1.GetExpRequest{Id: id}); err != nil {
		h.fail(w, r, err)
		return
	}
	stream, err := h.exps.WatchExp(ctx, &falconv1.WatchExpRequest{Id: id, AfterSeq: after})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	s := startSSE(w)
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) || r.Context().Err() != nil {
			return // a break without terminal: the browser reconnects
		}
		if err != nil {
			_ = s.send("failure", "", map[string]string{"message": message(err)})
			return
		}
		if ev.GetKind() == "" { // a heartbeat, or the end carried alone
			if ev.GetTerminal() {
				_ = s.send("end", "", map[string]int64{"seq": ev.GetSeq()})
				return
			}
			if s.ping() != nil {
				return
			}
			continue
		}
		c := change{Seq: ev.GetSeq(), Kind: ev.GetKind(), ID: ev.GetId(), Status: ev.GetStatus(),
			Reason: ev.GetReason(), Message: ev.GetMessage(), Detail: ev.GetDetail(), Terminal: ev.GetTerminal()}
		if t := ev.GetTime(); t != nil {
			c.Time = t.AsTime().UTC().Format(time.RFC3339)
		}
		if s.send("change", strconv.FormatInt(ev.GetSeq(), 10), c) != nil {
			return
		}
		if ev.GetTerminal() {
			_ = s.send("end", "", map[string]int64{"seq": ev.GetSeq()})
			return
		}
	}
}

// listLive keeps the list's statuses live. The page names the experiments
// it shows that have not ended, each with the version it rendered
// (id=exp-...:3). One cycle:
//  1. Read each experiment still followed (GetExp, as the caller) and send
//     those whose version moved past what the page has; stop following
//     the ones that ended or are gone.
//  2. When none is left, send "end" and return.
//  3. Wait until the change feed names one of them (only those are read
//     next), the poll interval passes (all are), or the browser leaves;
//     send a comment when the stream has been quiet for the heartbeat.
//
// The feed subscription is taken before the first read, so a change
// written between a read and the wait still wakes the next cycle.
func (h *Handler) listLive(w http.ResponseWriter, r *http.Request) {
	r, done := h.stream(r)
	defer done()
	known := map[string]int32{}
	for _, v := range r.URL.Query()["id"] {
		id, ver, _ := strings.Cut(v, ":")
		if !ids.Valid(ids.Experiment, id) {
			h.fail(w, r, badRequest("id", "%q is not an experiment ID (exp- and ten characters of [a-z0-9], optionally :version)", v))
			return
		}
		n, _ := strconv.ParseInt(ver, 10, 32)
		known[id] = int32(n)
	}
	if len(known) > maxLive {
		h.fail(w, r, badRequest("id", "at most %d experiments can be followed at once, got %d", maxLive, len(known)))
		return
	}
	ctx := h.call(r)
	var wake <-chan struct{}
	var feedSeq int64
	if h.feed != nil {
		var cancel func()
		wake, cancel = h.feed.Subscribe()
		defer cancel()
		feedSeq = h.feed.Latest()
	}
	// The caller's credentials are checked before the stream starts, by
	// reading the first experiment: a refused caller gets the error page's
	// status, not an empty stream.
	dirty := make(map[string]bool, len(known))
	for id := range known {
		dirty[id] = true
	}
	first := true
	var s *sse
	poll := time.NewTicker(h.poll)
	defer poll.Stop()
	quiet := time.NewTimer(h.heartbeat)
	defer quiet.Stop()
	for {
		changes, err := h.readChanged(ctx, known, dirty)
		if first {
			first = false
			if err != nil {
				h.fail(w, r, err)
				return
			}
			s = startSSE(w)
		}
		if err != nil {
			_ = s.send("failure", "", map[string]string{"message": message(err)})
			return
		}
		for _, c := range changes {
			if s.send("change", "", c) != nil {
				return
			}
		}
		if len(changes) > 0 {
			quiet.Reset(h.heartbeat)
		}
		if len(known) == 0 {
			_ = s.send("end", "", struct{}{})
			return
		}
		for len(dirty) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-wake:
				cs, ok := h.feed.Since(feedSeq)
				if !ok { // fell behind the feed: read them all to be sure
					feedSeq = h.feed.Latest()
					markAll(dirty, known)
				}
				for _, c := range cs {
					feedSeq = c.Seq
					if _, ok := known[c.ExpID]; ok {
						dirty[c.ExpID] = true
					}
				}
			case <-poll.C:
				markAll(dirty, known)
			case <-quiet.C:
				if s.ping() != nil {
					return
				}
				quiet.Reset(h.heartbeat)
			}
		}
	}
}

func markAll(dirty map[string]bool, known map[string]int32) {
	for id := range known {
		dirty[id] = true
	}
}

// readChanged reads the dirty experiments and returns those whose version
// is past the one known, updating known: an ended or deleted experiment is
// no longer followed. A refused read fails the whole stream.
func (h *Handler) readChanged(ctx context.Context, known map[string]int32, dirty map[string]bool) ([]change, error) {
	var out []change
	for id := range dirty {
		delete(dirty, id)
		e, err := h.exps.GetExp(ctx, &falconv1.GetExpRequest{Id: id})
		if status.Code(err) == codes.NotFound {
			delete(known, id)
			out = append(out, change{Kind: "experiment", ID: id, Gone: true, Terminal: true})
			continue
		}
		if err != nil {
			return nil, err
		}
		ended := lifecycle.ExperimentMachine.IsTerminal(lifecycle.Status(e.GetStatus()))
		if e.GetVersion() != known[id] {
			out = append(out, change{Kind: "experiment", ID: id, Status: e.GetStatus(), Reason: e.GetReason(),
				Message: e.GetMessage(), Version: e.GetVersion(), Terminal: ended})
		}
		known[id] = e.GetVersion()
		if ended {
			delete(known, id)
		}
	}
	return out, nil
}
