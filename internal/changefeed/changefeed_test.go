package changefeed

import "testing"

func TestPublishCoalescesAndNeverBlocks(t *testing.T) {
	f := New()
	ch, cancel := f.Subscribe()
	for i := 0; i < 100; i++ {
		f.Publish() // must not block although nobody reads
	}
	<-ch
	select {
	case <-ch:
		t.Fatal("100 publishes produced more than one pending wake-up")
	default:
	}
	cancel()
	f.Publish()
	select {
	case <-ch:
		t.Fatal("cancelled subscriber was woken")
	default:
	}
}

func TestEverySubscriberIsWoken(t *testing.T) {
	f := New()
	a, ca := f.Subscribe()
	b, cb := f.Subscribe()
	defer ca()
	defer cb()
	f.Publish()
	<-a
	<-b
}

func TestSinceReplaysWhatItHolds(t *testing.T) {
	f := New(WithRetain(3))
	if got, ok := f.Since(0); len(got) != 0 || !ok {
		t.Fatalf("Since(0) on an empty feed = %v, %v; want nothing, true", got, ok)
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		f.Publish(Change{Kind: "job", ID: id})
	}
	tests := []struct {
		since int64
		want  string
		ok    bool
	}{
		{5, "", true},
		{4, "e", true},
		{2, "cde", true},
		{1, "", false}, // b fell out of the ring
		{0, "", false},
		{9, "", false}, // a seq this feed never gave: another epoch's
	}
	for _, tt := range tests {
		got, ok := f.Since(tt.since)
		ids := ""
		for i, c := range got {
			ids += c.ID
			if c.Seq != tt.since+int64(i)+1 {
				t.Errorf("Since(%d)[%d].Seq = %d", tt.since, i, c.Seq)
			}
		}
		if ids != tt.want || ok != tt.ok {
			t.Errorf("Since(%d) = %q, %v; want %q, %v", tt.since, ids, ok, tt.want, tt.ok)
		}
	}
	if f.Latest() != 5 || New().Epoch() == f.Epoch() {
		t.Errorf("Latest %d, epochs %s %s", f.Latest(), f.Epoch(), New().Epoch())
	}
}
