package auth

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// DefaultKeyRefreshInterval is the least time between two fetches of the
// team's keys.
const DefaultKeyRefreshInterval = 10 * time.Second

// throttledKeys sits under go-oidc's RemoteKeySet, which fetches the keys
// again for every token whose kid it does not know. Such a token is cheap
// to forge (its claims are public), so without a limit anyone who can reach
// the server could make it fetch the keys once per request. Within the
// interval after a fetch, this transport answers from that fetch instead:
// the unknown kid stays unknown and the token is refused without a request.
// A real rotation is seen at most one interval late; a failed fetch is
// remembered for the interval too, so a down endpoint is not hammered.
type throttledKeys struct {
	base     http.RoundTripper
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	at      time.Time // of the last fetch, successful or not
	status  int
	header  http.Header
	body    []byte
	lastErr error
}

func (t *throttledKeys) RoundTrip(req *http.Request) (*http.Response, error) {
	// Held across the fetch: concurrent refreshes wait for one answer.
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if !t.at.IsZero() && now.Sub(t.at) < t.interval {
		if t.lastErr != nil {
			return nil, fmt.Errorf("signing keys: last fetch failed %s ago, next try in %s: %w",
				now.Sub(t.at).Round(time.Millisecond), (t.interval - now.Sub(t.at)).Round(time.Millisecond), t.lastErr)
		}
		return t.replay(req), nil
	}
	t.at = now
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.lastErr = err
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.lastErr = err
		return nil, err
	}
	t.lastErr, t.status, t.header, t.body = nil, resp.StatusCode, resp.Header.Clone(), body
	return t.replay(req), nil
}

func (t *throttledKeys) replay(req *http.Request) *http.Response {
	return &http.Response{
		Status: http.StatusText(t.status), StatusCode: t.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: t.header.Clone(), Body: io.NopCloser(bytes.NewReader(t.body)), ContentLength: int64(len(t.body)),
		Request: req,
	}
}
