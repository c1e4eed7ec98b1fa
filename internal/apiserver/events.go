package apiserver

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

const (
	// eventPoll is how often a watcher reads the events table when the
	// change feed has not woken it: the safety net for changes written
	// through another server replica, whose feed this one does not see.
	// This server's own writes wake watchers at once.
	eventPoll = 2 * time.Second
	// eventHeartbeat is how long a stream may go without a message before
	// it gets one that carries no change: proxies in front of the server
	// (Cloudflare closes a connection idle for 100 s) would otherwise cut
	// a quiet `exp wait` every few minutes.
	eventHeartbeat = 30 * time.Second
)

// WatchExp streams an experiment's events. One cycle:
//  1. Read the events after the last one sent.
//  2. On the first cycle, and whenever an event says an entity ended, read
//     the experiment and its jobs, then the events once more: whatever made
//     them all terminal was written, with its event, before they were read.
//     Repeat while that last read brings another end.
//  3. Send the events; when everything has ended, the last carries terminal
//     (or a message without a change does, if there is no event to carry
//     it) and the stream ends.
//  4. Wait until the change feed names the experiment, the poll interval
//     passes, or the client goes away; send a heartbeat when the stream has
//     been quiet for eventHeartbeat.
//
// The subscription is taken before the first read, so a change written
// between a read and the wait still wakes the next cycle.
func (s *Server) WatchExp(req *falconv1.WatchExpRequest, stream falconv1.ExperimentService_WatchExpServer) error {
	ctx := stream.Context()
	id := req.GetId()
	if err := checkID("id", ids.Experiment, id); err != nil {
		return err
	}
	if req.GetAfterSeq() < 0 {
		return errdefs.Invalid("after_seq", "must not be negative, got %d", req.GetAfterSeq())
	}
	wake, cancel := s.feed.Subscribe()
	defer cancel()
	feedSeq := s.feed.Latest()
	if _, err := s.store.GetExp(ctx, id); err != nil {
		return err
	}

	cursor := req.GetAfterSeq()
	check := true // whether this cycle reads the experiment's state
	poll := time.NewTicker(eventPoll)
	defer poll.Stop()
	quiet := time.NewTimer(eventHeartbeat)
	defer quiet.Stop()
	for {
		evs, done, err := s.nextEvents(ctx, id, cursor, check)
		if err != nil {
			return err
		}
		for i, e := range evs {
			msg := eventToAPI(e)
			msg.Terminal = done && i == len(evs)-1
			if err := stream.Send(msg); err != nil {
				return err
			}
			cursor = e.Seq
		}
		if len(evs) > 0 {
			quiet.Reset(eventHeartbeat)
		}
		if done {
			if len(evs) == 0 {
				return stream.Send(&falconv1.ExpEvent{Seq: cursor, ExpId: id, Terminal: true})
			}
			return nil
		}
		if req.GetHistoryOnly() {
			return nil
		}
		check = false
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
				var changes []changefeed.Change
				var ok bool
				changes, ok = s.feed.Since(feedSeq)
				if !ok {
					feedSeq = s.feed.Latest()
					waiting = false // fell behind the feed: read to be sure
				}
				for _, c := range changes {
					feedSeq = c.Seq
					waiting = waiting && c.ExpID != id
				}
			case <-poll.C:
				waiting = false
			case <-quiet.C:
				if err := stream.Send(&falconv1.ExpEvent{Seq: cursor, ExpId: id}); err != nil {
					return err
				}
				quiet.Reset(eventHeartbeat)
			}
		}
	}
}

// nextEvents reads the experiment's events after cursor and, with check or
// when one of them ends an entity, whether the experiment and every job of
// it have ended. The state is read before the last read of events: an
// event commits with its change, so every change the state reflects has
// its event in what is returned.
func (s *Server) nextEvents(ctx context.Context, id string, cursor int64, check bool) ([]store.Event, bool, error) {
	evs, err := s.eventsAfter(ctx, id, cursor)
	if err != nil {
		return nil, false, err
	}
	for _, e := range evs {
		check = check || endsEntity(e)
	}
	if !check {
		return evs, false, nil
	}
	for {
		done, err := s.expEnded(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if len(evs) > 0 {
			cursor = evs[len(evs)-1].Seq
		}
		more, err := s.eventsAfter(ctx, id, cursor)
		if err != nil {
			return nil, false, err
		}
		evs = append(evs, more...)
		// An entity that ended after the state was read: read it again,
		// or that end would be sent and never checked.
		again := false
		for _, e := range more {
			again = again || endsEntity(e)
		}
		if done || !again {
			return evs, done, nil
		}
	}
}

// eventsAfter reads every event after cursor, page by page.
func (s *Server) eventsAfter(ctx context.Context, id string, cursor int64) ([]store.Event, error) {
	var out []store.Event
	for {
		page, err := s.store.ListEvents(ctx, store.EventFilter{ExpID: id, AfterSeq: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) == 0 || len(out) >= store.MaxEventsPerExp {
			return out, nil
		}
		cursor = page[len(page)-1].Seq
	}
}

func endsEntity(e store.Event) bool {
	if e.Kind == store.EventJob {
		return lifecycle.JobMachine.IsTerminal(e.Status)
	}
	return lifecycle.ExperimentMachine.IsTerminal(e.Status)
}

// expEnded reports whether the experiment and every job of it are terminal.
func (s *Server) expEnded(ctx context.Context, id string) (bool, error) {
	exp, err := s.store.GetExp(ctx, id)
	if err != nil {
		return false, err
	}
	if !lifecycle.ExperimentMachine.IsTerminal(exp.Status) {
		return false, nil
	}
	jobs, err := s.allJobs(ctx, store.JobFilter{ExpID: id})
	if err != nil {
		return false, err
	}
	for _, j := range jobs {
		if !lifecycle.JobMachine.IsTerminal(j.Status) {
			return false, nil
		}
	}
	return true, nil
}

func eventToAPI(e store.Event) *falconv1.ExpEvent {
	return &falconv1.ExpEvent{
		Seq: e.Seq, Time: timestamppb.New(e.Time), ExpId: e.ExpID, Kind: e.Kind, Id: e.EntityID,
		Status: string(e.Status), Reason: e.Reason, Message: e.Message, Detail: e.Detail,
	}
}
