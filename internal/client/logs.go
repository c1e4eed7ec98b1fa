package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/logjson"
)

// LogStream reads the lines of GetExpLogs as the server sends them.
type LogStream struct {
	s   *stream
	err error
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
	// A batch of lines can be large: one read holds it.
	s, err := c.openStream(ctx, idPath("/v1/experiments", req.GetId())+"/logs", q, "log stream", 1<<20)
	if err != nil {
		return nil, err
	}
	return &LogStream{s: s}, nil
}

// Recv returns the next line, or io.EOF when the stream ended normally.
func (s *LogStream) Recv() (*falconv1.LogLine, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		s.pending, s.err = s.recv()
	}
	l := s.pending[0]
	s.pending = s.pending[1:]
	return l, nil
}

// recv reads the next batch of lines.
func (s *LogStream) recv() ([]*falconv1.LogLine, error) {
	data, err := s.s.next()
	if err != nil {
		return nil, err
	}
	lines, ok, err := logjson.DecodeChunk(data)
	if err != nil {
		return nil, s.s.undecodable(err)
	}
	if !ok {
		var ch chunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return nil, s.s.undecodable(err)
		}
		return nil, s.s.failed(ch)
	}
	return lines, nil
}

// Buffered is how many lines Recv returns without waiting for the server:
// a printer flushes its output when it reaches 0.
func (s *LogStream) Buffered() int { return len(s.pending) }

// Close stops the stream and releases the connection.
func (s *LogStream) Close() error { return s.s.close() }
