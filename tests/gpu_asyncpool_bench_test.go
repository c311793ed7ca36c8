package tests

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
)

// BenchmarkGPUAsyncPoolPair is a 1 MiB allocation+free pair through the
// asyncpool allocator on the real driver: the defaults (no capture status
// asked while no capture is open), the status asked inside each call, the
// status asked by a call of its own, with history, and with the hooks'
// check; compare with BenchmarkGPUPoolAllocFree,
// the same pair through the backend alone.
func BenchmarkGPUAsyncPoolPair(b *testing.B) {
	be := openGPU(b, "cuda")
	defer be.Close()
	s, err := be.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer be.StreamDestroy(s)
	// unguarded hides the backend's guarded calls: the capture status is a
	// backend call of its own.
	type unguarded struct{ gpumem.Backend }
	for _, c := range []struct {
		name      string
		check     asyncpool.CaptureCheck
		history   int
		unguarded bool
	}{
		{"tracked", asyncpool.CaptureCheckTracked, 0, false},
		{"every_call", asyncpool.CaptureCheckEveryCall, 0, false},
		{"every_call,unguarded", asyncpool.CaptureCheckEveryCall, 0, true},
		{"every_call,history", asyncpool.CaptureCheckEveryCall, asyncpool.DefaultHistorySize, false},
		{"hooks", asyncpool.CaptureCheckHooks, 0, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := asyncpool.DefaultOptions()
			o.CaptureCheck, o.HistorySize = c.check, c.history
			var ab gpumem.Backend = be
			if c.unguarded {
				ab = unguarded{be}
			}
			a, err := asyncpool.New(ab, o)
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
