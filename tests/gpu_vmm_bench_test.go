package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
)

// vmmPhases accumulates the time of each virtual memory call of a benchmark.
type vmmPhases struct {
	d [6]time.Duration
	n [6]int
}

const (
	phCreate = iota
	phMap
	phAccess
	phUnmap
	phRelease
	phMalloc
)

var vmmPhaseNames = [...]string{"create", "map", "access", "unmap", "release", "malloc"}

// time runs fn, adding its duration to phase ph; an error ends the benchmark.
func (v *vmmPhases) time(b *testing.B, ph int, fn func() error) {
	t := time.Now()
	err := fn()
	v.d[ph] += time.Since(t)
	v.n[ph]++
	if err != nil {
		b.Fatalf("%s: %v", vmmPhaseNames[ph], err)
	}
}

// report gives each phase's mean µs a call as a metric.
func (v *vmmPhases) report(b *testing.B) {
	for ph, n := range v.n {
		if n > 0 {
			b.ReportMetric(float64(v.d[ph].Microseconds())/float64(n), vmmPhaseNames[ph]+"-µs")
		}
	}
}

// BenchmarkGPUVMMCosts measures what each call of the virtual memory API
// costs by size on CUDA device 0, the costs behind expandable segments:
// fresh (create, map, grant access, unmap, release), remap (one handle
// mapped, granted and unmapped again: a move), pieces (ten handles of a
// tenth of the size mapped side by side, granted and unmapped in one call each),
// and malloc (cuMemAlloc and cuMemFree of the same size, for comparison).
func BenchmarkGPUVMMCosts(b *testing.B) {
	be := openGPU(b, "cuda")
	defer be.Close()
	gran, err := be.MemGranularity(0, false)
	if err != nil {
		b.Skipf("no virtual memory API: %v", err)
	}
	const maxSize = 4 << 30
	va, err := be.MemAddressReserve(maxSize, gran)
	if err != nil {
		b.Fatal(err)
	}
	defer be.MemAddressFree(va, maxSize)
	for _, size := range []uint64{2 << 20, 20 << 20, 200 << 20, 2 << 30} {
		b.Run(fmt.Sprintf("fresh/%s", gpumem.FormatBytes(size)), func(b *testing.B) {
			var v vmmPhases
			for b.Loop() {
				var h gpumem.MemHandle
				v.time(b, phCreate, func() (err error) { h, err = be.MemCreate(0, size); return })
				v.time(b, phMap, func() error { return be.MemMap(va, size, 0, h) })
				v.time(b, phAccess, func() error { return be.MemSetAccess(va, size, 0, gpumem.AccessReadWrite) })
				v.time(b, phUnmap, func() error { return be.MemUnmap(va, size) })
				v.time(b, phRelease, func() error { return be.MemRelease(h) })
			}
			v.report(b)
		})
		b.Run(fmt.Sprintf("remap/%s", gpumem.FormatBytes(size)), func(b *testing.B) {
			h, err := be.MemCreate(0, size)
			if err != nil {
				b.Fatal(err)
			}
			defer be.MemRelease(h)
			var v vmmPhases
			at := [2]gpumem.Ptr{va, va.Add(size)}
			k := 0
			for b.Loop() {
				p := at[k%2]
				k++
				v.time(b, phMap, func() error { return be.MemMap(p, size, 0, h) })
				v.time(b, phAccess, func() error { return be.MemSetAccess(p, size, 0, gpumem.AccessReadWrite) })
				v.time(b, phUnmap, func() error { return be.MemUnmap(p, size) })
			}
			v.report(b)
		})
		if size >= 20<<20 {
			b.Run(fmt.Sprintf("pieces10/%s", gpumem.FormatBytes(size)), func(b *testing.B) {
				piece := size / 10 / gran * gran
				var v vmmPhases
				var hs [10]gpumem.MemHandle
				for b.Loop() {
					for i := range hs {
						v.time(b, phCreate, func() (err error) { hs[i], err = be.MemCreate(0, piece); return })
						v.time(b, phMap, func() error { return be.MemMap(va.Add(uint64(i)*piece), piece, 0, hs[i]) })
					}
					v.time(b, phAccess, func() error { return be.MemSetAccess(va, 10*piece, 0, gpumem.AccessReadWrite) })
					v.time(b, phUnmap, func() error { return be.MemUnmap(va, 10*piece) })
					for i := range hs {
						v.time(b, phRelease, func() error { return be.MemRelease(hs[i]) })
					}
				}
				v.report(b)
			})
		}
		b.Run(fmt.Sprintf("malloc/%s", gpumem.FormatBytes(size)), func(b *testing.B) {
			var v vmmPhases
			for b.Loop() {
				var p gpumem.Ptr
				v.time(b, phMalloc, func() (err error) { p, err = be.Malloc(0, size); return })
				v.time(b, phRelease, func() error { return be.Free(0, p) })
			}
			v.report(b)
		})
	}
}
