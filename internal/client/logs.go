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
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/logjson"
)

// LogStream reads the lines of GetExpLogs as the server sends them.
type LogStream struct {
	c      *Client
	ctx    context.Context
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
	err    error
	// pending are the lines of the last batch not yet returned.
	pending []*falconv1.LogLine
}

// GetExpLogs opens the log stream of an experiment. The stream has no
// timeout (with Follow it may run for hours); cancel ctx or Close it to stop.
// Errors the server reports before the first line (an unknown experiment)
// are returned here; later ones by Recv.
func (c *Client) GetExpLogs(ctx context.Context, req *falconv1.GetExpLogsRequest) (*LogStream, error) {
	q := url.Values{}
	setString(q, "role", req.GetRole())
	if req.Rank != nil {
		q.Set("rank", strconv.FormatInt(int64(req.GetRank()), 10))
	}
	setInt(q, "tail", req.GetTail())
	if req.GetFollow() {
		q.Set("follow", "true")
	}
	setString(q, "grep", req.GetGrep())
	setString(q, "resume", req.GetResume())
	if t := req.GetSince(); t != nil {
		q.Set("since", t.AsTime().UTC().Format(time.RFC3339Nano))
	}
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, idPath("/v1/experiments", req.GetId())+"/logs", q, nil)
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
	return &LogStream{c: c, ctx: ctx, body: resp.Body, r: bufio.NewReaderSize(resp.Body, 1<<20), cancel: cancel}, nil
}

// chunk is one element of grpc-gateway's newline-delimited stream.
type chunk struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// Recv returns the next line, or io.EOF when the stream ended normally.
func (s *LogStream) Recv() (*falconv1.LogLine, error) {
	if len(s.pending) > 0 {
		l := s.pending[0]
		s.pending = s.pending[1:]
		return l, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	// Chunks are newline-delimited, and JSON strings hold no raw newline.
	data, err := s.r.ReadBytes('\n')
	data = bytes.TrimSpace(data)
	if len(data) == 0 && err != nil {
		switch {
		case errors.Is(err, io.EOF):
			s.err = io.EOF
		case s.ctx.Err() != nil:
			s.err = s.c.transportError(s.ctx, err)
		default:
			s.err = status.Errorf(codes.Unavailable, "log stream from %s interrupted: %v", s.c.base, err)
		}
		return nil, s.err
	}
	if len(data) == 0 {
		return s.Recv()
	}
	lines, ok, derr := logjson.DecodeChunk(data)
	if derr != nil {
		if err != nil && !errors.Is(err, io.EOF) {
			// A chunk cut short by a broken connection.
			s.err = status.Errorf(codes.Unavailable, "log stream from %s interrupted: %v", s.c.base, err)
		} else {
			s.err = status.Errorf(codes.Internal, "decoding log stream from %s: %v", s.c.base, derr)
		}
		return nil, s.err
	}
	if !ok {
		var ch chunk
		if jerr := json.Unmarshal(data, &ch); jerr != nil || len(ch.Error) == 0 || string(ch.Error) == "null" {
			s.err = status.Errorf(codes.Internal, "decoding log stream from %s: a chunk holds neither lines nor an error", s.c.base)
			return nil, s.err
		}
		st, sok := decodeStatus(ch.Error)
		if !sok {
			st = status.New(codes.Unknown, string(ch.Error))
		}
		s.err = st.Err()
		return nil, s.err
	}
	s.pending = lines
	return s.Recv()
}

// Buffered is how many lines Recv returns without waiting for the server:
// a printer flushes its output when it reaches 0.
func (s *LogStream) Buffered() int { return len(s.pending) }

// Close stops the stream and releases the connection.
func (s *LogStream) Close() error {
	s.cancel()
	return s.body.Close()
}
