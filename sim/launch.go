package sim

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// This file is the host functions and the simulator's Go kernels (Launch).

func callSafely(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	fn()
	return nil
}

func (g *GPU) runKernel(st *stream, o *op) {
	n0 := len(g.violations)
	if !g.check(st, o) || !g.resolveAtRun(st, o, o.dst, o.size, true) {
		return
	}
	g.touchRange(o.dst, o.size, st.dev.ord)
	buf := make([]byte, o.size)
	if !g.readMem(o.dst, buf) {
		g.violate(st, o, o.dst, o.size, "kernel read memory that is no longer allocated")
		return
	}
	g.mu.Unlock()
	err := callSafely(func() { o.kfn(buf) })
	g.mu.Lock()
	if err != nil {
		g.violate(st, o, o.dst, o.size, "kernel function panicked: %v", err)
		return
	}
	if len(g.violations) == n0 && !g.check(st, o) {
		return
	}
	if !g.writeMem(o.dst, buf) {
		g.violate(st, o, o.dst, o.size, "kernel wrote memory that was freed while it ran")
	}
}

// LaunchHostFunc queues fn on s; it runs on the stream's goroutine (or the
// goroutine that drives the stream in Manual mode) when s reaches it.
func (g *GPU) LaunchHostFunc(s gpumem.Stream, fn func()) error {
	if err := g.enter(symtab.LaunchHostFunc); err != nil {
		return err
	}
	if fn == nil {
		return errf(symtab.LaunchHostFunc, symtab.CUDAInvalidValue, "nil function")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.LaunchHostFunc, s)
	if err != nil {
		return err
	}
	return g.enqueue(st, &op{kind: opHost, m: symtab.LaunchHostFunc, fn: fn})
}

// Launch queues a simulated kernel on s that reads and writes [p, p+size):
// when s reaches it, fn gets a copy of that memory and what it leaves in the
// slice is written back. The use-after-free detector checks the range when
// the kernel runs; managed pages fault to the stream's device; memory of
// another device needs peer access (EnablePeerAccess, MemPoolSetAccess or
// MemSetAccess). fn must not call the GPU.
func (g *GPU) Launch(s gpumem.Stream, p gpumem.Ptr, size uint64, fn func(mem []byte)) error {
	if err := g.enter(symtab.Launch); err != nil {
		return err
	}
	if fn == nil {
		return errf(symtab.Launch, symtab.CUDAInvalidValue, "nil kernel function")
	}
	if size > 1<<34 {
		return errf(symtab.Launch, symtab.CUDAInvalidValue, "a simulated kernel touches at most 16 GiB, not %d bytes", size)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.lookupStream(symtab.Launch, s)
	if err != nil {
		return err
	}
	uses, err := g.resolve(symtab.Launch, uint64(p), size, st.dev.ord, true)
	if err != nil {
		return err
	}
	return g.enqueue(st, &op{kind: opKernel, m: symtab.Launch, dst: uint64(p), size: size, uses: uses, kfn: fn, dev: st.dev.ord})
}
