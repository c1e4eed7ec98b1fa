package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// EventStream reads the events of WatchExp as the server sends them.
type EventStream struct {
	c      *Client
	ctx    context.Context
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
	err    error
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
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, idPath("/v1/experiments", req.GetId())+"/events", q, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer cancel()
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, c.transportError(ctx, err)
		}
		return nil, decodeError(resp, data)
	}
	return &EventStream{c: c, ctx: ctx, body: resp.Body, r: bufio.NewReader(resp.Body), cancel: cancel}, nil
}

// Recv returns the next message, or io.EOF when the stream ended normally.
// A stream that ends without a message marked terminal was cut (a server
// restart, a proxy): resume after the last seq with AfterSeq.
func (s *EventStream) Recv() (*falconv1.ExpEvent, error) {
	if s.err != nil {
		return nil, s.err
	}
	data, err := s.r.ReadBytes('\n')
	data = bytes.TrimSpace(data)
	if len(data) == 0 && err != nil {
		switch {
		case errors.Is(err, io.EOF):
			s.err = io.EOF
		case s.ctx.Err() != nil:
			s.err = s.c.transportError(s.ctx, err)
		default:
			s.err = status.Errorf(codes.Unavailable, "event stream from %s interrupted: %v", s.c.base, err)
		}
		return nil, s.err
	}
	if len(data) == 0 {
		return s.Recv()
	}
	var ch chunk
	if jerr := json.Unmarshal(data, &ch); jerr != nil {
		if err != nil {
			s.err = status.Errorf(codes.Unavailable, "event stream from %s interrupted: %v", s.c.base, err)
		} else {
			s.err = status.Errorf(codes.Internal, "decoding event stream from %s: %v", s.c.base, jerr)
		}
		return nil, s.err
	}
	if len(ch.Result) > 0 && string(ch.Result) != "null" {
		ev := new(falconv1.ExpEvent)
		if uerr := unmarshal.Unmarshal(ch.Result, ev); uerr != nil {
			s.err = status.Errorf(codes.Internal, "decoding event stream from %s: %v", s.c.base, uerr)
			return nil, s.err
		}
		return ev, nil
	}
	if len(ch.Error) == 0 || string(ch.Error) == "null" {
		s.err = status.Errorf(codes.Internal, "decoding event stream from %s: a chunk holds neither an event nor an error", s.c.base)
		return nil, s.err
	}
	st, ok := decodeStatus(ch.Error)
	if !ok {
		st = status.New(codes.Unknown, string(ch.Error))
	}
	s.err = st.Err()
	return nil, s.err
}

// Close stops the stream and releases the connection.
func (s *EventStream) Close() error {
	s.cancel()
	return s.body.Close()
}
