package backendtest

import (
	"testing"

	"github.com/gpumem/gpumem"
)

func testPeer(t *testing.T, b gpumem.Backend, dev int) {
	n, err := b.DeviceCount()
	must(t, err, "DeviceCount")
	if n < 2 {
		t.Skipf("peer access needs two devices; the backend has %d", n)
	}
	peer := (dev + 1) % n
	self, err := b.CanAccessPeer(dev, dev)
	must(t, err, "CanAccessPeer of a device and itself")
	if self {
		t.Error("a device reports peer access to itself")
	}
	ok, err := b.CanAccessPeer(dev, peer)
	must(t, err, "CanAccessPeer")
	if !ok {
		if err := b.EnablePeerAccess(dev, peer); err == nil {
			t.Error("EnablePeerAccess succeeded between devices that cannot access each other")
		}
		t.Skipf("devices %d and %d cannot access each other", dev, peer)
	}
	must(t, b.EnablePeerAccess(dev, peer), "EnablePeerAccess")
	must(t, b.EnablePeerAccess(dev, peer), "EnablePeerAccess twice")
	defer func() { must(t, b.DisablePeerAccess(dev, peer), "DisablePeerAccess") }()
	const size = 1 << 20
	a := malloc(t, b, dev, size)
	c := malloc(t, b, peer, size)
	want := pattern(size, 8)
	must(t, b.CopyToDevice(a, want), "CopyToDevice")
	s := newStream(t, b, dev, gpumem.StreamNonBlocking)
	must(t, b.MemcpyPeerAsync(c, peer, a, dev, size, s), "MemcpyPeerAsync")
	must(t, b.StreamSynchronize(s), "StreamSynchronize")
	expectBytes(t, readBack(t, b, c, size), want, "peer copy")
	if pool, err := b.DefaultMemPool(dev); err == nil {
		prev, err := b.MemPoolGetAccess(pool, peer)
		must(t, err, "MemPoolGetAccess")
		must(t, b.MemPoolSetAccess(pool, peer, gpumem.AccessReadWrite), "MemPoolSetAccess for the peer")
		got, err := b.MemPoolGetAccess(pool, peer)
		must(t, err, "MemPoolGetAccess")
		if got != gpumem.AccessReadWrite {
			t.Errorf("peer access to the pool reads %d after granting read-write", got)
		}
		must(t, b.MemPoolSetAccess(pool, peer, prev), "restore pool access")
	}
}
