package tests

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
)

// BenchmarkGPUAsyncPoolPair is a 1 MiB allocation+free pair through the
// asyncpool allocator on the real driver, with each capture check and with
// and without history; compare with BenchmarkGPUPoolAllocFree, the same pair
// through the backend alone.
func BenchmarkGPUAsyncPoolPair(b *testing.B) {
	be := openGPU(b, "cuda")
	defer be.Close()
	s, err := be.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer be.StreamDestroy(s)
	for _, c := range []struct {
		name    string
		check   asyncpool.CaptureCheck
		history int
	}{
		{"every_call", asyncpool.CaptureCheckEveryCall, asyncpool.DefaultHistorySize},
		{"every_call,no_history", asyncpool.CaptureCheckEveryCall, 0},
		{"hooks", asyncpool.CaptureCheckHooks, asyncpool.DefaultHistorySize},
		{"hooks,no_history", asyncpool.CaptureCheckHooks, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := asyncpool.DefaultOptions()
			o.CaptureCheck, o.HistorySize = c.check, c.history
			a, err := asyncpool.New(be, o)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			b.ReportAllocs()
			for b.Loop() {
				p, err := a.Allocate(1<<20, s)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Deallocate(p, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
