package tests

import (
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/internal/ccall"
)

// gpuPairRounds is how many times BenchmarkGPUAsyncPoolPair runs each of its
// variants, in rotation.
const gpuPairRounds = 11

// BenchmarkGPUAsyncPoolPair is a 1 MiB allocation+free pair on the real
// driver: through the backend alone (MallocFromPoolAsync and FreeAsync,
// the floor), and through the asyncpool allocator with the defaults (no
// capture status asked while no capture is open), with the status asked
// inside each call, asked by a call of its own, with history, and with the
// hooks' check; and the backend's pair and the default allocator's with
// short calls held off ("ordinary": each driver call through
// runtime.cgocall). The variants run in rotation, gpuPairRounds times each, in
// one process and one pool: from process to process the same pair costs up
// to 1.5x more or less on the H200, so variants compared across processes,
// or run one after the other, differ by more than what tells them apart.
// Compare the medians of each variant's runs.
func BenchmarkGPUAsyncPoolPair(b *testing.B) {
	be, s, pool := openCUDAPool(b)
	// unguarded hides the backend's guarded calls: the capture status is a
	// backend call of its own.
	type unguarded struct{ gpumem.Backend }
	type variant struct {
		name      string
		check     asyncpool.CaptureCheck
		history   int
		unguarded bool
	}
	variants := []variant{
		{"tracked", asyncpool.CaptureCheckTracked, 0, false},
		{"every_call", asyncpool.CaptureCheckEveryCall, 0, false},
		{"every_call,unguarded", asyncpool.CaptureCheckEveryCall, 0, true},
		{"every_call,history", asyncpool.CaptureCheckEveryCall, asyncpool.DefaultHistorySize, false},
		{"hooks", asyncpool.CaptureCheckHooks, 0, false},
	}
	allocs := make([]*asyncpool.Allocator, len(variants))
	for i, c := range variants {
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
		allocs[i] = a
		defer a.Close()
	}
	for range gpuPairRounds {
		backendPair := func(b *testing.B) {
			benchPairs(b, func() (gpumem.Ptr, error) { return be.MallocFromPoolAsync(1<<20, pool, s) },
				func(p gpumem.Ptr) error { return be.FreeAsync(p, s) })
		}
		b.Run("backend", backendPair)
		// ",ordinary" runs the same pairs with short calls held off
		// (internal/ccall.HoldShort), each call through runtime.cgocall: the
		// difference is what short calls save, in the same process and pool.
		ccall.HoldShort()
		b.Run("backend,ordinary", backendPair)
		b.Run("tracked,ordinary", func(b *testing.B) {
			benchPairs(b, func() (gpumem.Ptr, error) { return allocs[0].Allocate(1<<20, s) },
				func(p gpumem.Ptr) error { return allocs[0].Deallocate(p, s) })
		})
		ccall.ReleaseShort()
		for i, c := range variants {
			a := allocs[i]
			b.Run(c.name, func(b *testing.B) {
				benchPairs(b, func() (gpumem.Ptr, error) { return a.Allocate(1<<20, s) },
					func(p gpumem.Ptr) error { return a.Deallocate(p, s) })
			})
		}
	}
}
