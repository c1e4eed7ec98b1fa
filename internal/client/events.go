package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// EventStream reads the events of WatchExp as the server sends them.
type EventStream struct {
	s   *stream
	err error
}

// WatchExp opens an experiment's event stream. Like GetExpLogs it has no
// timeout; cancel ctx or Close it to stop. Errors the server reports before
// the first event (an unknown experiment) are returned here, later ones by
// Recv.
func (c *Client) WatchExp(ctx context.Context, req *falconv1.WatchExpRequest) (*EventStream, error) {
	q := url.Values{}
	if req.GetAfterSeq() != 0 {
		q.Set("after_seq", strconv.FormatInt(req.GetAfterSeq(), 10))
	}
	if req.GetHistoryOnly() {
		q.Set("history_only", "true")
	}
	s, err := c.openStream(ctx, idPath("/v1/experiments", req.GetId())+"/events", q, "event stream", 4096)
	if err != nil {
		return nil, err
	}
	return &EventStream{s: s}, nil
}

// Recv returns the next message, or io.EOF when the stream ended normally.
// A stream that ends without a message marked terminal was cut (a server
// restart, a proxy): resume after the last seq with AfterSeq.
func (s *EventStream) Recv() (*falconv1.ExpEvent, error) {
	if s.err == nil {
		var ev *falconv1.ExpEvent
		if ev, s.err = s.recv(); s.err == nil {
			return ev, nil
		}
	}
	return nil, s.err
}

func (s *EventStream) recv() (*falconv1.ExpEvent, error) {
	data, err := s.s.next()
	if err != nil {
		return nil, err
	}
	var ch chunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return nil, s.s.undecodable(err)
	}
	if len(ch.Result) == 0 || string(ch.Result) == "null" {
		return nil, s.s.failed(ch)
	}
	ev := new(falconv1.ExpEvent)
	if err := unmarshal.Unmarshal(ch.Result, ev); err != nil {
		return nil, s.s.undecodable(err)
	}
	return ev, nil
}

// Close stops the stream and releases the connection.
func (s *EventStream) Close() error { return s.s.close() }
