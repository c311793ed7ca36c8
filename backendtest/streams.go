package backendtest

import (
	"bytes"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
)

func testStreams(t *testing.T, b gpumem.Backend, dev int) {
	least, greatest, err := b.StreamPriorityRange(dev)
	must(t, err, "StreamPriorityRange")
	if greatest > least {
		t.Errorf("priority range least %d greatest %d: greatest must be numerically lower or equal", least, greatest)
	}
	for _, flags := range []gpumem.StreamFlags{gpumem.StreamDefault, gpumem.StreamNonBlocking} {
		for _, prio := range []int{least, greatest} {
			s, err := b.StreamCreate(dev, flags, prio)
			must(t, err, "StreamCreate")
			if s.Device != dev || s.Handle == 0 {
				t.Errorf("StreamCreate = %v", s)
			}
			p := malloc(t, b, dev, 4096)
			must(t, b.MemsetAsync(p, 1, 4096, s), "MemsetAsync")
			must(t, b.StreamSynchronize(s), "StreamSynchronize")
			done, err := b.StreamQuery(s)
			must(t, err, "StreamQuery")
			if !done {
				t.Error("StreamQuery after StreamSynchronize says work is pending")
			}
			must(t, b.StreamDestroy(s), "StreamDestroy")
		}
	}
}

// block queues a host function on s that waits until release is closed (or
// 10 s pass, so that a broken backend cannot hang the suite).
func block(t *testing.T, b gpumem.Backend, s gpumem.Stream, release <-chan struct{}) {
	t.Helper()
	must(t, b.LaunchHostFunc(s, func() {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
	}), "LaunchHostFunc")
}

func testStreamWaitEvent(t *testing.T, b gpumem.Backend, dev int) {
	const n = 1 << 20
	a := newStream(t, b, dev, gpumem.StreamNonBlocking)
	c := newStream(t, b, dev, gpumem.StreamNonBlocking)
	e := newEvent(t, b, dev, gpumem.EventDisableTiming)
	x := malloc(t, b, dev, n)
	z := malloc(t, b, dev, n)
	must(t, b.Memset(z, 0, n), "Memset")
	release := make(chan struct{})
	block(t, b, a, release)
	must(t, b.MemsetAsync(x, 0x77, n, a), "MemsetAsync on a")
	must(t, b.EventRecord(e, a), "EventRecord")
	must(t, b.StreamWaitEvent(c, e), "StreamWaitEvent")
	must(t, b.MemcpyAsync(z, x, n, c), "MemcpyAsync on c")
	done, err := b.StreamQuery(c)
	must(t, err, "StreamQuery")
	if done {
		t.Error("the waiting stream finished while the stream it waits for is blocked")
	}
	ready, err := b.EventQuery(e)
	must(t, err, "EventQuery")
	if ready {
		t.Error("the event completed while its stream is blocked")
	}
	close(release)
	must(t, b.StreamSynchronize(c), "StreamSynchronize")
	expectBytes(t, readBack(t, b, z, n), bytes.Repeat([]byte{0x77}, n), "data ordered by the event")
}

func testEvents(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamDefault)
	start := newEvent(t, b, dev, gpumem.EventDefault)
	end := newEvent(t, b, dev, gpumem.EventDefault)
	ready, err := b.EventQuery(start)
	must(t, err, "EventQuery")
	if !ready {
		t.Error("an event never recorded is not complete")
	}
	p := malloc(t, b, dev, 8<<20)
	must(t, b.EventRecord(start, s), "EventRecord")
	must(t, b.MemsetAsync(p, 1, 8<<20, s), "MemsetAsync")
	must(t, b.EventRecord(end, s), "EventRecord")
	must(t, b.EventSynchronize(end), "EventSynchronize")
	ready, err = b.EventQuery(end)
	must(t, err, "EventQuery")
	if !ready {
		t.Error("EventQuery after EventSynchronize is not complete")
	}
	ms, err := b.EventElapsed(start, end)
	must(t, err, "EventElapsed")
	if ms < 0 || math.IsNaN(float64(ms)) {
		t.Errorf("EventElapsed = %v", ms)
	}
	nt := newEvent(t, b, dev, gpumem.EventDisableTiming)
	must(t, b.EventRecord(nt, s), "EventRecord")
	must(t, b.EventSynchronize(nt), "EventSynchronize")
	if _, err := b.EventElapsed(start, nt); err == nil {
		t.Error("EventElapsed with an event without timing succeeded")
	}
}

func testHostFuncOrder(t *testing.T, b gpumem.Backend, dev int) {
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	var mu sync.Mutex
	var order []int
	for i := 0; i < 50; i++ {
		must(t, b.LaunchHostFunc(s, func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}), "LaunchHostFunc")
	}
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 50 {
		t.Fatalf("%d host functions ran, want 50", len(order))
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("host functions ran out of order: %v", order)
		}
	}
}
