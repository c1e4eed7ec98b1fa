package cloudlogtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Method names, for Fail and Calls.
const (
	ListLogEntries = "ListLogEntries"
	TailLogEntries = "TailLogEntries"
)

// Server is a LoggingServiceV2 on a loopback listener. Its zero value is not
// usable; call Start.
type Server struct {
	addr string
	gs   *grpc.Server

	mu       sync.Mutex
	entries  []*loggingpb.LogEntry // sorted by (timestamp, insert_id)
	seq      int
	sessions map[*tailSession]struct{}
	failures map[string]*failure
	calls    map[string]int
	served   int
	onList   func(*loggingpb.ListLogEntriesRequest)
	onTail   func(*loggingpb.TailLogEntriesRequest)
	closed   bool

	loggingpb.UnimplementedLoggingServiceV2Server
}

type failure struct {
	code  codes.Code
	msg   string
	times int // < 0: every call
}

// Start serves a new Server on 127.0.0.1 until the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("cloudlogtest: listen: %v", err)
	}
	s := &Server{
		addr:     lis.Addr().String(),
		gs:       grpc.NewServer(),
		sessions: map[*tailSession]struct{}{},
		failures: map[string]*failure{},
		calls:    map[string]int{},
	}
	loggingpb.RegisterLoggingServiceV2Server(s.gs, s)
	go func() { _ = s.gs.Serve(lis) }()
	tb.Cleanup(s.Close)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// ClientOptions are what the real client needs to talk to this server:
// its endpoint, no credentials and a plaintext connection.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Close ends every tail session and stops the server. It is safe to call
// more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for ts := range s.sessions {
		ts.end()
	}
	s.mu.Unlock()
	s.gs.Stop()
}

// Append ingests entries, as if the logging agent had written them: each
// gets an insert_id if it has none and is delivered to every open tail
// session whose filter it matches. The entries must not be changed
// afterwards.
func (s *Server) Append(entries ...*loggingpb.LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sorted := true
	for _, e := range entries {
		if e.GetInsertId() == "" {
			s.seq++
			e.InsertId = fmt.Sprintf("i%012d", s.seq)
		}
		if e.ReceiveTimestamp == nil {
			e.ReceiveTimestamp = timestamppb.Now()
		}
		if n := len(s.entries); n > 0 && less(e, s.entries[n-1]) {
			sorted = false
		}
		s.entries = append(s.entries, e)
		for ts := range s.sessions {
			if ts.filter.match(e) {
				ts.push(e)
			}
		}
	}
	if !sorted {
		slices.SortStableFunc(s.entries, compare)
	}
}

// Len is the number of entries held.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Fail makes the next times calls of method (ListLogEntries or
// TailLogEntries) fail with code; times < 0 fails every call until Fail is
// called again with times 0.
func (s *Server) Fail(method string, code codes.Code, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if times == 0 {
		delete(s.failures, method)
		return
	}
	s.failures[method] = &failure{code: code, msg: "cloudlogtest: injected " + code.String(), times: times}
}

// Calls is how many times method was called, failed calls included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Served is how many entries ListLogEntries has returned in all.
func (s *Server) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// OnList sets a function called by every successful ListLogEntries after
// its page is chosen and before it is sent; entries it appends are not in
// that page. Tests use it to ingest lines in the gap between a listing and
// a tail.
func (s *Server) OnList(fn func(*loggingpb.ListLogEntriesRequest)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onList = fn
}

// OnTail sets a function called when a tail session has been opened and
// registered, before it sends anything: entries it appends reach that
// session.
func (s *Server) OnTail(fn func(*loggingpb.TailLogEntriesRequest)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onTail = fn
}

// EndTails ends every open tail session as Cloud Logging does when a
// session reaches its time limit: the client sees the stream end.
func (s *Server) EndTails() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ts := range s.sessions {
		ts.end()
		delete(s.sessions, ts)
	}
}

// Tails is the number of open tail sessions.
func (s *Server) Tails() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// call counts a call and returns the injected failure, if any.
func (s *Server) call(method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
	f := s.failures[method]
	if f == nil {
		return nil
	}
	if f.times > 0 {
		f.times--
		if f.times == 0 {
			delete(s.failures, method)
		}
	}
	return status.Error(f.code, f.msg)
}

// ListLogEntries serves pages in timestamp order. Its page token is a
// cursor (the last entry sent), so entries appended between pages are not
// skipped or repeated, as with Cloud Logging.
func (s *Server) ListLogEntries(ctx context.Context, req *loggingpb.ListLogEntriesRequest) (*loggingpb.ListLogEntriesResponse, error) {
	if err := s.call(ListLogEntries); err != nil {
		return nil, err
	}
	if err := checkResourceNames(req.GetResourceNames()); err != nil {
		return nil, err
	}
	desc := false
	switch req.GetOrderBy() {
	case "", "timestamp asc":
	case "timestamp desc":
		desc = true
	default:
		return nil, status.Errorf(codes.InvalidArgument, "order_by %q: only \"timestamp asc\" and \"timestamp desc\" are allowed", req.GetOrderBy())
	}
	size := int(req.GetPageSize())
	switch {
	case size < 0 || size > 1000:
		return nil, status.Errorf(codes.InvalidArgument, "page_size %d: must be between 0 and 1000", size)
	case size == 0:
		size = 50
	}
	filter, err := parseFilter(req.GetFilter())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "filter: %v", err)
	}
	var cursor *loggingpb.LogEntry
	if tok := req.GetPageToken(); tok != "" {
		if cursor, err = decodeToken(tok, desc); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "page_token: %v", err)
		}
	}

	s.mu.Lock()
	resp := &loggingpb.ListLogEntriesResponse{}
	n := len(s.entries)
	// The first index after the cursor in the order asked for.
	i := 0
	if cursor != nil {
		i, _ = slices.BinarySearchFunc(s.entries, cursor, compare)
		if !desc && i < n && compare(s.entries[i], cursor) == 0 {
			i++
		}
		if desc {
			i = n - i // entries before the cursor, counted from the end
		}
	}
	for ; i < n; i++ {
		e := s.entries[i]
		if desc {
			e = s.entries[n-1-i]
		}
		if !filter.match(e) {
			continue
		}
		if len(resp.Entries) == size {
			resp.NextPageToken = encodeToken(resp.Entries[size-1], desc)
			break
		}
		resp.Entries = append(resp.Entries, e)
	}
	s.served += len(resp.Entries)
	hook := s.onList
	s.mu.Unlock()
	if hook != nil {
		hook(req)
	}
	return resp, nil
}

// TailLogEntries streams the entries appended after the session opens that
// match its filter, each response ordered by timestamp.
func (s *Server) TailLogEntries(stream loggingpb.LoggingServiceV2_TailLogEntriesServer) error {
	if err := s.call(TailLogEntries); err != nil {
		return err
	}
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	if err := checkResourceNames(req.GetResourceNames()); err != nil {
		return err
	}
	if w := req.GetBufferWindow(); w != nil && (w.AsDuration() < 0 || w.AsDuration() > time.Minute) {
		return status.Errorf(codes.InvalidArgument, "buffer_window %v: must be between 0 and 60s", w.AsDuration())
	}
	filter, err := parseFilter(req.GetFilter())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "filter: %v", err)
	}
	ts := &tailSession{filter: filter, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "cloudlogtest: server closed")
	}
	s.sessions[ts] = struct{}{}
	hook := s.onTail
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, ts)
		s.mu.Unlock()
	}()
	if hook != nil {
		hook(req)
	}
	for {
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-ts.done:
			return nil
		case <-ts.wake:
		}
		batch := ts.take()
		if len(batch) == 0 {
			continue
		}
		slices.SortStableFunc(batch, compare)
		if err := stream.Send(&loggingpb.TailLogEntriesResponse{Entries: batch}); err != nil {
			return err
		}
	}
}

type tailSession struct {
	filter node
	mu     sync.Mutex
	queue  []*loggingpb.LogEntry
	wake   chan struct{}
	done   chan struct{}
	ended  bool
}

func (ts *tailSession) push(e *loggingpb.LogEntry) {
	ts.mu.Lock()
	ts.queue = append(ts.queue, e)
	ts.mu.Unlock()
	select {
	case ts.wake <- struct{}{}:
	default:
	}
}

func (ts *tailSession) take() []*loggingpb.LogEntry {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	q := ts.queue
	ts.queue = nil
	return q
}

func (ts *tailSession) end() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.ended {
		ts.ended = true
		close(ts.done)
	}
}

// checkResourceNames accepts what Falcon sends: exactly one project.
func checkResourceNames(names []string) error {
	if len(names) != 1 || !strings.HasPrefix(names[0], "projects/") || strings.Count(names[0], "/") != 1 || names[0] == "projects/" {
		return status.Errorf(codes.InvalidArgument, "resource_names %q: exactly one \"projects/PROJECT_ID\" is supported", names)
	}
	return nil
}

func compare(a, b *loggingpb.LogEntry) int {
	if c := a.GetTimestamp().AsTime().Compare(b.GetTimestamp().AsTime()); c != 0 {
		return c
	}
	return strings.Compare(a.GetInsertId(), b.GetInsertId())
}

func less(a, b *loggingpb.LogEntry) bool { return compare(a, b) < 0 }

// A page token is the order and the (timestamp, insert_id) of the last entry
// sent, so a token of one order cannot continue a listing of the other.
func encodeToken(e *loggingpb.LogEntry, desc bool) string {
	order := "asc"
	if desc {
		order = "desc"
	}
	raw := order + "|" + e.GetTimestamp().AsTime().Format(time.RFC3339Nano) + "|" + e.GetInsertId()
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeToken(tok string, desc bool) (*loggingpb.LogEntry, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, fmt.Errorf("not a token of this server")
	}
	parts := strings.SplitN(string(raw), "|", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a token of this server")
	}
	if (parts[0] == "desc") != desc {
		return nil, fmt.Errorf("token of a listing in another order")
	}
	t, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return nil, fmt.Errorf("not a token of this server")
	}
	return &loggingpb.LogEntry{Timestamp: timestamppb.New(t), InsertId: parts[2]}, nil
}

var _ loggingpb.LoggingServiceV2Server = (*Server)(nil)
