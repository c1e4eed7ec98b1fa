package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Line is a progress line on w, its text read from text on every tick.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	text  func() string
	stop  chan struct{}
	drawn sync.WaitGroup
	once  sync.Once
	shown bool // a text has been drawn
}

// Start draws text on w every interval until Stop.
func Start(w io.Writer, every time.Duration, text func() string) *Line {
	l := &Line{w: w, text: text, stop: make(chan struct{})}
	l.drawn.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				l.draw("\n")
				return
			case <-t.C:
				l.draw("")
			}
		}
	})
	return l
}

// draw redraws the line in place: \r to its start, ESC [K to clear it.
// An empty text is nothing to show yet: no line is drawn for it, and a
// Line that never had one leaves nothing behind.
func (l *Line) draw(end string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.text()
	if t == "" && !l.shown {
		return
	}
	l.shown = true
	fmt.Fprintf(l.w, "\r\033[K%s%s", t, end)
}

// Write prints p above the line: the line is cleared, p written, and the
// line drawn again at the next tick. It makes a Line the writer of a
// command's notices while the line is shown.
func (l *Line) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := io.WriteString(l.w, "\r\033[K"); err != nil {
		return 0, err
	}
	return l.w.Write(p)
}

// Stop draws the line a last time, ends it and stops drawing. It may be
// called more than once.
func (l *Line) Stop() {
	l.once.Do(func() { close(l.stop) })
	l.drawn.Wait()
}
