package tests

import (
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/churn"
)

// TestGPUShortCalls: the stream-ordered pool calls are short calls on CUDA
// (symtab.Row.Short), made while the collector runs and GOMAXPROCS
// changes, from many goroutines, each on its own stream, through the
// backend and through asyncpool, with memory written and read back; then
// the same with short calls held off. The pool's memory is all returned.
func TestGPUShortCalls(t *testing.T) {
	vb, s0, pool := openCUDAPool(t)
	be := gpumem.Backend(vb)
	if !ccall.ShortEnabled() {
		t.Fatal("short calls are held off in a GPU test binary with no callback registered (GPUMEM_SHORT_CALLS=0?)")
	}
	a, err := asyncpool.New(be, asyncpool.DefaultOptions())
	must(t, err)
	defer a.Close()
	for _, ordinary := range []bool{false, true} {
		if ordinary {
			ccall.HoldShort()
		}
		stop := churn.Start()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := s0
				if g > 0 {
					st, err := be.StreamCreate(0, gpumem.StreamNonBlocking, 0)
					if err != nil {
						errs <- err
						return
					}
					defer be.StreamDestroy(st)
					s = st
				}
				for i := range 4000 {
					n := uint64(4096 + (i%64)*8192)
					var p gpumem.Ptr
					var err error
					if i%2 == 0 {
						p, err = be.MallocFromPoolAsync(n, pool, s)
					} else {
						p, err = a.Allocate(n, s)
					}
					if err != nil {
						errs <- err
						return
					}
					if i%500 == 0 {
						v := byte(g*16 + i%16)
						if err := be.MemsetAsync(p, v, n, s); err != nil {
							errs <- err
							return
						}
						if err := be.StreamSynchronize(s); err != nil {
							errs <- err
							return
						}
						host := make([]byte, n)
						if err := be.CopyFromDevice(host, p); err != nil {
							errs <- err
							return
						}
						for j, b := range host {
							if b != v {
								t.Errorf("goroutine %d: byte %d of %d reads %#x, want %#x", g, j, n, b, v)
								break
							}
						}
					}
					if i%2 == 0 {
						err = be.FreeAsync(p, s)
					} else {
						err = a.Deallocate(p, s)
					}
					if err != nil {
						errs <- err
						return
					}
				}
				if err := be.StreamSynchronize(s); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		stop()
		close(errs)
		for err := range errs {
			t.Errorf("ordinary %v: %v", ordinary, err)
		}
		if ordinary {
			ccall.ReleaseShort()
		}
	}
	if st := a.Stats(0); st.AllocatedBytes[0].Current != 0 {
		t.Errorf("asyncpool holds %d bytes after every free", st.AllocatedBytes[0].Current)
	}
}
