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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stream is one server-streaming call as grpc-gateway sends it over HTTP:
// newline-delimited JSON chunks, each {"result": ...} or {"error": ...}.
// EventStream and LogStream decode its results; how a cut or a bad chunk
// reads is decided here, once for both.
type stream struct {
	c      *Client
	ctx    context.Context
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
	what   string // "event stream", for errors
	// cut is the read error that ended the last chunk before its newline:
	// the server ends every chunk with one, so a chunk that does not decode
	// was cut by the connection, not sent wrong.
	cut error
}

// chunk is one element of grpc-gateway's newline-delimited stream.
type chunk struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// openStream starts a streaming GET. It has no timeout; cancel ctx or close
// the stream to stop. An error the server reports before the first chunk
// (an unknown experiment) is returned here.
func (c *Client) openStream(ctx context.Context, path string, q url.Values, what string, bufSize int) (*stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer cancel()
		return nil, c.refused(ctx, resp)
	}
	return &stream{c: c, ctx: ctx, body: resp.Body, r: bufio.NewReaderSize(resp.Body, bufSize), cancel: cancel, what: what}, nil
}

// next returns the next non-empty chunk; io.EOF when the server ended the
// stream, Unavailable when the connection broke, or the caller's context
// error when it was cancelled.
func (s *stream) next() ([]byte, error) {
	for {
		// JSON strings hold no raw newline, so a newline ends a chunk.
		data, err := s.r.ReadBytes('\n')
		data = bytes.TrimSpace(data)
		if len(data) > 0 {
			s.cut = err
			return data, nil
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return nil, io.EOF
		case s.ctx.Err() != nil:
			return nil, s.c.transportError(s.ctx, err)
		default:
			return nil, s.interrupted(err)
		}
	}
}

func (s *stream) interrupted(err error) error {
	return status.Errorf(codes.Unavailable, "%s from %s interrupted: %v", s.what, s.c.base, err)
}

// undecodable is the error for a chunk that did not decode: the cut
// connection's when the chunk lacked its newline, else a bad chunk.
func (s *stream) undecodable(err error) error {
	if s.cut != nil {
		return s.interrupted(s.cut)
	}
	return status.Errorf(codes.Internal, "decoding %s from %s: %v", s.what, s.c.base, err)
}

// failed decodes an {"error": ...} chunk into the status the server sent.
func (s *stream) failed(ch chunk) error {
	if len(ch.Error) == 0 || string(ch.Error) == "null" {
		return s.undecodable(errors.New("a chunk holds neither a result nor an error"))
	}
	st, ok := decodeStatus(ch.Error)
	if !ok {
		st = status.New(codes.Unknown, string(ch.Error))
	}
	return st.Err()
}

func (s *stream) close() error {
	s.cancel()
	return s.body.Close()
}
