package logtime

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReaderDatesLinesByTheirEnd(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "r.log")
	lf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := os.OpenFile(log+Suffix, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	clock := t0
	rec := &Recorder{log: lf, index: idx, last: -1, now: func() time.Time { return clock }}
	write := func(s string, at time.Duration) {
		t.Helper()
		if _, err := lf.WriteString(s); err != nil {
			t.Fatal(err)
		}
		clock = t0.Add(at)
		if err := rec.Mark(); err != nil {
			t.Fatal(err)
		}
	}
	write("first\nsec", time.Second) // "sec" is half a line
	write("ond\n", 2*time.Second)
	if err := rec.Mark(); err != nil { // no growth: no record
		t.Fatal(err)
	}
	r, err := Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		end  int64
		want time.Duration
		ok   bool
	}{
		{6, time.Second, true},      // "first\n"
		{13, 2 * time.Second, true}, // "second\n" ended only with the second write
		{14, 0, false},              // not written yet
	} {
		got, ok := r.At(tc.end)
		if ok != tc.ok || (ok && !got.Equal(t0.Add(tc.want))) {
			t.Errorf("At(%d) = %v, %t; want %v, %t", tc.end, got, ok, t0.Add(tc.want), tc.ok)
		}
	}
	// What is appended later is read when a line needs it.
	write("third\n", 3*time.Second)
	if got, ok := r.At(19); !ok || !got.Equal(t0.Add(3*time.Second)) {
		t.Errorf("At(19) after more was written = %v, %t", got, ok)
	}
	if st, _ := os.Stat(log + Suffix); st.Size() != 3*recordSize {
		t.Errorf("index holds %d bytes, want 3 records", st.Size())
	}
}

func TestNoIndexDatesNothing(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "old.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.At(1); ok {
		t.Fatal("a log without an index was dated")
	}
}

// Watch marks the log when a process writes it, with no call from the
// writer: here another process, as a rank is. Where inotify is refused,
// poll does the same.
func TestWatchSeesWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch func(*Recorder) error
	}{{"inotify", (*Recorder).Watch}, {"poll", (*Recorder).poll}} {
		t.Run(tc.name, func(t *testing.T) { seesWrites(t, tc.watch) })
	}
}

func seesWrites(t *testing.T, watch func(*Recorder) error) {
	dir := t.TempDir()
	log := filepath.Join(dir, "r.log")
	lf, err := os.OpenFile(log, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := os.OpenFile(log+Suffix, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := NewRecorder(lf, idx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = watch(rec) }()
	r, err := Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before := time.Now()
	w, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	deadline := time.Now().Add(10 * time.Second)
	for line := int64(1); line <= 3; line++ {
		if _, err := w.WriteString("line\n"); err != nil {
			t.Fatal(err)
		}
		for {
			got, ok := r.At(5 * line)
			if ok {
				if got.Before(before) || got.After(time.Now()) {
					t.Fatalf("line %d dated %v, outside [%v, now]", line, got, before)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("line %d was never dated", line)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
