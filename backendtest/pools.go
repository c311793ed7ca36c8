package backendtest

import (
	"bytes"
	"math"
	"testing"

	"github.com/gpumem/gpumem"
)

func poolAttr(t *testing.T, b gpumem.Backend, p gpumem.MemPool, a gpumem.PoolAttribute) uint64 {
	t.Helper()
	v, err := b.MemPoolGetAttribute(p, a)
	must(t, err, "MemPoolGetAttribute "+a.String())
	return v
}

func testDefaultPool(t *testing.T, b gpumem.Backend, dev int) {
	pool, err := b.DefaultMemPool(dev)
	skipIfNotSupported(t, err, "DefaultMemPool")
	old := poolAttr(t, b, pool, gpumem.PoolReleaseThreshold)
	t.Cleanup(func() { _ = b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, old) })
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, math.MaxUint64), "set release threshold")
	if v := poolAttr(t, b, pool, gpumem.PoolReleaseThreshold); v != math.MaxUint64 {
		t.Errorf("release threshold reads %d after setting the maximum", v)
	}
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	usedBefore := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent)
	const n = 3 << 20
	p, err := b.MallocAsync(n, s)
	must(t, err, "MallocAsync")
	want := pattern(n, 2)
	h, err := b.MallocHost(n)
	must(t, err, "MallocHost")
	defer func() { must(t, b.FreeHost(h), "FreeHost") }()
	must(t, b.CopyToDevice(h, want), "fill pinned")
	must(t, b.MemcpyAsync(p, h, n, s), "copy into pool memory")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, p, n), want, "pool memory")
	used := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent)
	reserved := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent)
	if used < usedBefore+n {
		t.Errorf("used memory %d after allocating %d bytes (was %d)", used, n, usedBefore)
	}
	if reserved < used {
		t.Errorf("reserved %d < used %d", reserved, used)
	}
	if hi := poolAttr(t, b, pool, gpumem.PoolUsedMemHigh); hi < used {
		t.Errorf("used high %d < used %d", hi, used)
	}
	must(t, b.FreeAsync(p, s), "FreeAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	if u := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); u != usedBefore {
		t.Errorf("used memory %d after the free, want %d", u, usedBefore)
	}
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r < n {
		t.Errorf("reserved %d after the free with a maximal release threshold: the pool should keep its memory", r)
	}
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolUsedMemHigh, 0), "reset used high")
	if hi, u := poolAttr(t, b, pool, gpumem.PoolUsedMemHigh), poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); hi != u {
		t.Errorf("used high %d after reset, want current %d", hi, u)
	}
	if err := b.MemPoolSetAttribute(pool, gpumem.PoolReservedMemCurrent, 1); err == nil {
		t.Error("setting reserved_mem_current succeeded")
	}
	acc, err := b.MemPoolGetAccess(pool, dev)
	must(t, err, "MemPoolGetAccess")
	if acc != gpumem.AccessReadWrite {
		t.Errorf("the pool's own device has access %d", acc)
	}
}

func testCreatedPool(t *testing.T, b gpumem.Backend, dev int) {
	pool, err := b.MemPoolCreate(gpumem.PoolProps{Device: dev})
	skipIfNotSupported(t, err, "MemPoolCreate")
	defer func() { must(t, b.MemPoolDestroy(pool), "MemPoolDestroy") }()
	if v := poolAttr(t, b, pool, gpumem.PoolReleaseThreshold); v != 0 {
		t.Errorf("a new pool's release threshold is %d, want 0", v)
	}
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	const n = 5 << 20
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, math.MaxUint64), "set threshold")
	p, err := b.MallocFromPoolAsync(n, pool, s)
	must(t, err, "MallocFromPoolAsync")
	q, err := b.MallocFromPoolAsync(4096, pool, s)
	must(t, err, "MallocFromPoolAsync")
	must(t, b.MemsetAsync(p, 0x42, n, s), "MemsetAsync")
	must(t, b.MemcpyAsync(q, p.Add(n-4096), 4096, s), "MemcpyAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, q, 4096), bytes.Repeat([]byte{0x42}, 4096), "created pool memory")
	if u := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); u < n+4096 {
		t.Errorf("used %d with %d bytes allocated", u, n+4096)
	}
	must(t, b.FreeAsync(p, s), "FreeAsync")
	must(t, b.FreeAsync(q, s), "FreeAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	if u := poolAttr(t, b, pool, gpumem.PoolUsedMemCurrent); u != 0 {
		t.Errorf("used %d with nothing allocated", u)
	}
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r == 0 {
		t.Error("the pool released its memory despite a maximal release threshold")
	}
	must(t, b.MemPoolTrimTo(pool, 0), "MemPoolTrimTo")
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r != 0 {
		t.Errorf("reserved %d after trimming an unused pool to 0", r)
	}
	if hi := poolAttr(t, b, pool, gpumem.PoolReservedMemHigh); hi < n {
		t.Errorf("reserved high %d after reserving %d", hi, n)
	}
	// A release threshold of 0 returns memory at synchronization.
	must(t, b.MemPoolSetAttribute(pool, gpumem.PoolReleaseThreshold, 0), "set threshold 0")
	p, err = b.MallocFromPoolAsync(n, pool, s)
	must(t, err, "MallocFromPoolAsync")
	must(t, b.FreeAsync(p, s), "FreeAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	if r := poolAttr(t, b, pool, gpumem.PoolReservedMemCurrent); r != 0 {
		t.Errorf("reserved %d after synchronizing with release threshold 0", r)
	}
}
