package sim

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// deviceOf returns the device that owns address a, or -1 for host memory
// and unknown addresses; lock held.
func (g *GPU) deviceOf(a uint64) int {
	o := g.spanAt(a)
	if o == nil {
		return -1
	}
	switch o.kind {
	case objHost, objManaged:
		return -1
	}
	return o.dev
}

// syncDevOf picks the device whose legacy stream runs a synchronous copy:
// the device owning dst, else the one owning src, else device 0.
func (g *GPU) syncDevOf(dst, src uint64) *device {
	if d := g.deviceOf(dst); d >= 0 {
		return g.devs[d]
	}
	if d := g.deviceOf(src); d >= 0 {
		return g.devs[d]
	}
	return g.devs[0]
}

// syncOp queues o on d's legacy stream and waits for it; lock held.
func (g *GPU) syncOp(m symtab.Op, d *device, o *op) error {
	st := d.legacy
	if err := g.enqueue(st, o); err != nil {
		return err
	}
	return g.waitFor(m, st, st.enq)
}

func (g *GPU) copyOp(m symtab.Op, dst, src, size uint64, dev int) (*op, error) {
	du, err := g.resolve(m, dst, size, dev, false)
	if err != nil {
		return nil, err
	}
	su, err := g.resolve(m, src, size, dev, false)
	if err != nil {
		return nil, err
	}
	return &op{kind: opCopy, m: m, dst: dst, src: src, size: size, uses: append(du, su...), dev: dev}, nil
}

// Memcpy copies size bytes from src to dst and returns when done. It runs
// on the legacy default stream of the device owning dst (or src).
func (g *GPU) Memcpy(dst, src gpumem.Ptr, size uint64) error {
	if err := g.enter(symtab.Memcpy); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.syncDevOf(uint64(dst), uint64(src))
	o, err := g.copyOp(symtab.Memcpy, uint64(dst), uint64(src), size, d.ord)
	if err != nil {
		return err
	}
	return g.syncOp(symtab.Memcpy, d, o)
}

// MemcpyAsync copies size bytes from src to dst, ordered on s.
func (g *GPU) MemcpyAsync(dst, src gpumem.Ptr, size uint64, s gpumem.Stream) error {
	if err := g.enter(symtab.MemcpyAsync); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.MemcpyAsync, s)
	if err != nil {
		return err
	}
	o, err := g.copyOp(symtab.MemcpyAsync, uint64(dst), uint64(src), size, st.dev.ord)
	if err != nil {
		return err
	}
	return g.enqueue(st, o)
}

// MemcpyPeerAsync copies between the memory of two devices, ordered on s.
// Devices that cannot access each other (Config.Peer) fail with
// CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, which matches ErrNotSupported.
func (g *GPU) MemcpyPeerAsync(dst gpumem.Ptr, dstDev int, src gpumem.Ptr, srcDev int, size uint64, s gpumem.Stream) error {
	if err := g.enter(symtab.MemcpyPeerAsync); err != nil {
		return err
	}
	if _, err := g.device(symtab.MemcpyPeerAsync, dstDev); err != nil {
		return err
	}
	if _, err := g.device(symtab.MemcpyPeerAsync, srcDev); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.MemcpyPeerAsync, s)
	if err != nil {
		return err
	}
	if dstDev != srcDev && !g.peerPossible(dstDev, srcDev) {
		return errf(symtab.MemcpyPeerAsync, symtab.CUDAPeerAccessUnsupported, "devices %d and %d cannot access each other", dstDev, srcDev)
	}
	if size > 0 {
		if d := g.deviceOf(uint64(dst)); d != dstDev {
			return errf(symtab.MemcpyPeerAsync, symtab.CUDAInvalidValue, "destination %#x is not memory of device %d", uint64(dst), dstDev)
		}
		if d := g.deviceOf(uint64(src)); d != srcDev {
			return errf(symtab.MemcpyPeerAsync, symtab.CUDAInvalidValue, "source %#x is not memory of device %d", uint64(src), srcDev)
		}
	}
	o, err := g.copyOp(symtab.MemcpyPeerAsync, uint64(dst), uint64(src), size, -1)
	if err != nil {
		return err
	}
	o.dev = st.dev.ord
	return g.enqueue(st, o)
}

// Memset sets size bytes at p to value and returns when done.
func (g *GPU) Memset(p gpumem.Ptr, value byte, size uint64) error {
	if err := g.enter(symtab.Memset); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.syncDevOf(uint64(p), 0)
	uses, err := g.resolve(symtab.Memset, uint64(p), size, d.ord, false)
	if err != nil {
		return err
	}
	return g.syncOp(symtab.Memset, d, &op{kind: opSet, m: symtab.Memset, dst: uint64(p), size: size, val: value, uses: uses, dev: d.ord})
}

// MemsetAsync sets size bytes at p to value, ordered on s.
func (g *GPU) MemsetAsync(p gpumem.Ptr, value byte, size uint64, s gpumem.Stream) error {
	if err := g.enter(symtab.MemsetAsync); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.MemsetAsync, s)
	if err != nil {
		return err
	}
	uses, err := g.resolve(symtab.MemsetAsync, uint64(p), size, st.dev.ord, false)
	if err != nil {
		return err
	}
	return g.enqueue(st, &op{kind: opSet, m: symtab.MemsetAsync, dst: uint64(p), size: size, val: value, uses: uses, dev: st.dev.ord})
}

// CopyToDevice copies src to the memory at dst (any kind) and returns when done.
func (g *GPU) CopyToDevice(dst gpumem.Ptr, src []byte) error {
	if err := g.enter(symtab.CopyToDevice); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.syncDevOf(uint64(dst), 0)
	uses, err := g.resolve(symtab.CopyToDevice, uint64(dst), uint64(len(src)), d.ord, false)
	if err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return g.syncOp(symtab.CopyToDevice, d, &op{kind: opCopy, m: symtab.CopyToDevice, dst: uint64(dst), size: uint64(len(src)), in: src, uses: uses, dev: d.ord})
}

// CopyFromDevice copies the memory at src (any kind) into dst and returns when done.
func (g *GPU) CopyFromDevice(dst []byte, src gpumem.Ptr) error {
	if err := g.enter(symtab.CopyFromDevice); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.syncDevOf(uint64(src), 0)
	uses, err := g.resolve(symtab.CopyFromDevice, uint64(src), uint64(len(dst)), d.ord, false)
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return g.syncOp(symtab.CopyFromDevice, d, &op{kind: opCopy, m: symtab.CopyFromDevice, src: uint64(src), size: uint64(len(dst)), out: dst, uses: uses, dev: d.ord})
}
