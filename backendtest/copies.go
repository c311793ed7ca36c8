package backendtest

import (
	"bytes"
	"testing"

	"github.com/gpumem/gpumem"
)

func testCopies(t *testing.T, b gpumem.Backend, dev int) {
	const n = 3<<20 + 17
	a := malloc(t, b, dev, n)
	c := malloc(t, b, dev, n)
	want := pattern(n, 1)
	must(t, b.CopyToDevice(a, want), "CopyToDevice")
	must(t, b.Memcpy(c, a, n), "Memcpy device to device")
	expectBytes(t, readBack(t, b, c, n), want, "device to device")
	// Offsets inside allocations.
	must(t, b.Memcpy(c.Add(100), a.Add(1000), 5000), "Memcpy at offsets")
	got := readBack(t, b, c, n)
	copy(want[100:5100], pattern(n, 1)[1000:6000])
	expectBytes(t, got, want, "copy at offsets")
	must(t, b.CopyToDevice(a, nil), "empty CopyToDevice")
}

func testCopiesAsync(t *testing.T, b gpumem.Backend, dev int) {
	const n = 2 << 20
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	h1, err := b.MallocHost(n)
	must(t, err, "MallocHost")
	defer func() { must(t, b.FreeHost(h1), "FreeHost") }()
	h2, err := b.MallocHost(n)
	must(t, err, "MallocHost")
	defer func() { must(t, b.FreeHost(h2), "FreeHost") }()
	d1 := malloc(t, b, dev, n)
	d2 := malloc(t, b, dev, n)
	want := pattern(n, 5)
	must(t, b.CopyToDevice(h1, want), "fill pinned")
	must(t, b.MemcpyAsync(d1, h1, n, s), "H2D async")
	must(t, b.MemcpyAsync(d2, d1, n, s), "D2D async")
	must(t, b.MemcpyAsync(h2, d2, n, s), "D2H async")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, h2, n), want, "async round trip")
	// The default stream too.
	def := gpumem.Stream{Device: dev}
	must(t, b.MemsetAsync(d2, 0, n, def), "MemsetAsync on the default stream")
	must(t, b.MemcpyAsync(d2, d1, n/2, def), "MemcpyAsync on the default stream")
	must(t, b.StreamSynchronize(def), "StreamSynchronize(default)")
	w := append(append([]byte(nil), want[:n/2]...), make([]byte, n/2)...)
	expectBytes(t, readBack(t, b, d2, n), w, "default stream copies")
}

func testMemset(t *testing.T, b gpumem.Backend, dev int) {
	const n = 1<<20 + 3
	p := malloc(t, b, dev, n)
	must(t, b.Memset(p, 0x5a, n), "Memset")
	want := bytes.Repeat([]byte{0x5a}, n)
	expectBytes(t, readBack(t, b, p, n), want, "Memset")
	s := newStream(t, b, dev, gpumem.StreamDefault)
	must(t, b.MemsetAsync(p.Add(10), 0xc3, 1000, s), "MemsetAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	for i := 10; i < 1010; i++ {
		want[i] = 0xc3
	}
	expectBytes(t, readBack(t, b, p, n), want, "MemsetAsync of a sub-range")
}
