package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// DefaultTimeout bounds each unary request. Streams (log following) have no
// overall limit: they last as long as the caller wants.
const DefaultTimeout = 30 * time.Second

// TokenFunc returns a bearer token for the Authorization header. Returning ""
// sends no header.
type TokenFunc func(ctx context.Context) (string, error)

// Client calls one Falcon server. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	http      *http.Client
	timeout   time.Duration
	token     TokenFunc
	userAgent string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces http.DefaultClient. Its Timeout, if any, also
// applies to streams, so leave it zero and use WithTimeout instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithTimeout sets the per-request timeout of unary calls; 0 means none.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithToken sets the source of bearer tokens; nil (the default) sends none.
func WithToken(f TokenFunc) Option { return func(c *Client) { c.token = f } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client for the server at serverURL, e.g.
// "http://127.0.0.1:7070". A URL without a scheme is taken as http.
func New(serverURL string, opts ...Option) (*Client, error) {
	u, err := parseServer(serverURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: u, http: http.DefaultClient, timeout: DefaultTimeout, userAgent: "falcon-cli"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// NormalizeServer returns serverURL as a Client names it (Server): with a
// scheme and without a trailing slash, query or fragment. Credentials are
// kept per normalized URL.
func NormalizeServer(serverURL string) (string, error) {
	u, err := parseServer(serverURL)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

func parseServer(serverURL string) (*url.URL, error) {
	raw := strings.TrimSpace(serverURL)
	if raw == "" {
		return nil, status.Error(codes.InvalidArgument, "server URL is empty; set --server or FALCON_SERVER")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, status.Errorf(codes.InvalidArgument, "invalid server URL %q: want http(s)://host:port", serverURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u, nil
}

// Server is the base URL the client talks to.
func (c *Client) Server() string { return c.base.String() }

var (
	marshal   = protojson.MarshalOptions{UseProtoNames: true}
	unmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// do sends one unary request and decodes the response into out.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out proto.Message) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout, errRequestTimeout)
		defer cancel()
	}
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return c.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp, data)
	}
	if err := unmarshal.Unmarshal(data, out); err != nil {
		return status.Errorf(codes.Internal, "decoding %s response from %s: %v", path, c.base, err)
	}
	return nil
}

var errRequestTimeout = errors.New("request timeout")

func (c *Client) send(ctx context.Context, method, path string, query url.Values, body proto.Message) (*http.Response, error) {
	target := c.base.String() + path
	if q := query.Encode(); q != "" {
		target += "?" + q
	}

	var rd io.Reader
	if body != nil {
		b, err := marshal.Marshal(body)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "encoding request: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "building request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.authorize(ctx, req); err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	return resp, nil
}

// authorize sets the User-Agent and the caller's credentials on req.
func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token == nil {
		return nil
	}
	tok, err := c.token(ctx)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err // already says what to do (e.g. log in again)
		}
		return status.Errorf(codes.Unauthenticated, "getting credentials: %v", err)
	}
	if tok != "" {
		// Authorization for the Falcon server; Cf-Access-Token for
		// Cloudflare Access in front of it, which does not read
		// Authorization.
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Cf-Access-Token", tok)
	}
	return nil
}

// transportError turns a failure to talk to the server into a status error
// whose message says which server and what to do about it.
func (c *Client) transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errRequestTimeout):
		// The server was not reached in time: unavailable (exit 6), not a
		// wait that timed out (exit 8, for `exp wait --timeout` alone).
		return status.Errorf(codes.Unavailable, "no answer from Falcon server at %s within %s", c.base, c.timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "request to Falcon server at %s: deadline exceeded", c.base)
	case errors.Is(err, syscall.ECONNREFUSED):
		return status.Errorf(codes.Unavailable,
			"cannot reach Falcon server at %s: connection refused; start one with `falcon dev`, or point --server (or FALCON_SERVER) at a running server", c.base)
	}
	var netErr net.Error
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return status.Errorf(codes.Unavailable,
			"cannot reach Falcon server at %s: %v; check --server (or FALCON_SERVER)", c.base, unwrapURLError(err))
	}
	return status.Errorf(codes.Unavailable, "talking to Falcon server at %s: %v", c.base, unwrapURLError(err))
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// refused is the error a non-2xx answer to a stream or a download
// carries; it closes the body.
func (c *Client) refused(ctx context.Context, resp *http.Response) error {
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return c.transportError(ctx, err)
	}
	return decodeError(resp, data)
}

// decodeError turns a non-2xx response into a status error. grpc-gateway
// answers with a google.rpc.Status as JSON; anything else (a proxy's HTML
// page, a server that is not Falcon) gets a code from the HTTP status.
func decodeError(resp *http.Response, body []byte) error {
	if st, ok := decodeStatus(body); ok {
		return st.Err()
	}
	// A stream that fails before its first message answers with the error
	// wrapped as a stream chunk: {"error": {...}}.
	var wrapped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &wrapped) == nil && len(wrapped.Error) > 0 {
		if st, ok := decodeStatus(wrapped.Error); ok {
			return st.Err()
		}
	}
	code := codeFromHTTP(resp.StatusCode)
	snippet := strings.TrimSpace(string(body))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "..."
	}
	msg := fmt.Sprintf("server at %s answered %s", resp.Request.URL.Host, resp.Status)
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		msg += " for " + resp.Request.Method + " " + resp.Request.URL.Path + "; is --server a Falcon API server?"
	}
	if snippet != "" {
		msg += ": " + snippet
	}
	return status.Error(code, msg)
}

// decodeStatus reads a google.rpc.Status JSON object. It keeps the details
// when their types are known, and falls back to code and message otherwise.
func decodeStatus(body []byte) (*status.Status, bool) {
	var p spb.Status
	if err := unmarshal.Unmarshal(body, &p); err == nil {
		if p.Code == 0 && p.Message == "" {
			return nil, false
		}
		return status.FromProto(&p), true
	}
	var loose struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &loose); err != nil || loose.Code == nil {
		return nil, false
	}
	return status.New(codes.Code(*loose.Code), loose.Message), true
}

// codeFromHTTP is the fallback for error responses that are not a
// google.rpc.Status; it only distinguishes what a caller can act on.
func codeFromHTTP(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		// The route, not an entity, is missing: the URL points elsewhere.
		return codes.Unimplemented
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}

// setInt adds name=v to q when v is not zero.
func setInt[T int32 | int64](q url.Values, name string, v T) {
	if v != 0 {
		q.Set(name, strconv.FormatInt(int64(v), 10))
	}
}

func setString(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

func idPath(prefix, id string) string {
	return prefix + "/" + url.PathEscape(id)
}
