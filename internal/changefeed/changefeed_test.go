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
