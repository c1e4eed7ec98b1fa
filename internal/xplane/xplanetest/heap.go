package xplanetest

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// heapMetric is the bytes of heap objects, live or not yet swept: what the
// heap holds at the moment, garbage included.
const heapMetric = "/memory/classes/heap/objects:bytes"

// HeapSampler keeps the high-water mark of the Go heap, sampled with
// runtime/metrics (which, unlike ReadMemStats, does not stop the world).
type HeapSampler struct {
	base uint64
	peak uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

// StartHeapSampler collects garbage, notes the heap as the base and
// samples it every interval until Stop.
func StartHeapSampler(every time.Duration) *HeapSampler {
	runtime.GC()
	h := &HeapSampler{stop: make(chan struct{})}
	h.base = heapBytes()
	h.peak = h.base
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.peak = max(h.peak, heapBytes())
			}
		}
	}()
	return h
}

// Stop ends sampling and returns the heap at the start and its highest
// sample since.
func (h *HeapSampler) Stop() (base, peak uint64) {
	close(h.stop)
	h.wg.Wait()
	h.peak = max(h.peak, heapBytes())
	return h.base, h.peak
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
