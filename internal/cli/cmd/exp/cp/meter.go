package cp

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/falconhq/falcon/internal/output"
)

// meter is what a copy has moved so far, for the progress line a terminal
// shows. A nil meter counts nothing: piped, a copy draws no line.
type meter struct {
	mu          sync.Mutex
	pre, what   string
	done, total int64 // total 0: not known
}

// prefix is put before what on the line: the rank, when there are several.
func (m *meter) prefix(p string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pre = p
}

// begin starts counting a stream of what, done bytes of total already there.
func (m *meter) begin(what string, done, total int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.what, m.done, m.total = what, done, total
}

// Write counts p: a meter is a writer beside the stream's own.
func (m *meter) Write(p []byte) (int, error) {
	if m != nil {
		m.mu.Lock()
		m.done += int64(len(p))
		m.mu.Unlock()
	}
	return len(p), nil
}

// reader counts what is read from r.
func (m *meter) reader(r io.Reader) io.Reader {
	if m == nil {
		return r
	}
	return io.TeeReader(r, m)
}

// line is the progress line: a tar stream's headers count too, so done
// is shown no higher than total.
func (m *meter) line() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.what == "":
		return "" // no stream has begun
	case m.total == 0:
		return fmt.Sprintf("%s%s: %s", m.pre, m.what, output.Bytes(m.done))
	}
	return fmt.Sprintf("%s%s: %s/%s", m.pre, m.what, output.Bytes(min(m.done, m.total)), output.Bytes(m.total))
}

// sizeOf is the bytes of the regular files among entries.
func sizeOf(entries []*entry) int64 {
	var n int64
	for _, e := range entries {
		if e.info.Mode().IsRegular() {
			n += e.info.Size()
		}
	}
	return n
}

// wantSize is the bytes of the files a download round asks for: todo's
// ("./" and a relative path each), or every one of want when todo is nil.
func wantSize(want map[string]sum, todo []string) int64 {
	var n int64
	if todo == nil {
		for _, s := range want {
			n += s.size
		}
		return n
	}
	for _, rel := range todo {
		n += want[strings.TrimPrefix(rel, "./")].size
	}
	return n
}
