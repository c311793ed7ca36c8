package blas_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/sim"
)

func newStreams(t *testing.T, g *sim.GPU, n int) []gpumem.Stream {
	t.Helper()
	var ss []gpumem.Stream
	for range n {
		s, err := g.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.StreamDestroy(s) })
		ss = append(ss, s)
	}
	return ss
}

// Each stream the handle queues calls on has its own workspace, allocated
// and returned on that stream: kernels still running on one stream never
// share their workspace with the next stream's.
func TestWorkspacePerStream(t *testing.T) {
	g := newGPU(t)
	ss := newStreams(t, g, 2)
	s1, s2 := ss[0], ss[1]
	r := &simResource{g: g}
	h, err := blas.Open(g, 0, blas.WithStream(s1), blas.WithWorkspace(r, 4096))
	if err != nil {
		t.Fatal(err)
	}
	first := r.take()
	if len(first) != 1 || !hasStream(first[0], "alloc", s1) {
		t.Fatalf("Open on s1 made %v", first)
	}
	if err := h.SetStream(s2); err != nil {
		t.Fatal(err)
	}
	second := r.take()
	if len(second) != 1 || !hasStream(second[0], "alloc", s2) || addr(second[0]) == addr(first[0]) {
		t.Fatalf("moving to s2 made %v (s1's workspace %v)", second, first)
	}
	if err := h.SetStream(s1); err != nil {
		t.Fatal(err)
	}
	if err := h.SetStream(s2); err != nil {
		t.Fatal(err)
	}
	if l := r.take(); len(l) != 0 {
		t.Errorf("coming back to kept streams made %v", l)
	}
	if err := h.ReleaseStream(s2); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("ReleaseStream of the current stream: %v", err)
	}
	if err := h.ReleaseStream(s1); err != nil {
		t.Fatal(err)
	}
	if l := r.take(); len(l) != 1 || l[0] != "free "+addr(first[0])+" "+handle(s1) {
		t.Errorf("ReleaseStream(s1) made %v, want s1's workspace freed on s1", l)
	}
	if err := h.ReleaseStream(s1); err != nil {
		t.Errorf("ReleaseStream of a stream with no workspace: %v", err)
	}
	if err := h.SetStream(s1); err != nil { // a new one for s1
		t.Fatal(err)
	}
	if l := r.take(); len(l) != 1 || !hasStream(l[0], "alloc", s1) {
		t.Errorf("s1 after its release made %v", l)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	l := r.take()
	slices.Sort(l)
	if len(l) != 2 || !hasStream(l[0], "free", s1) && !hasStream(l[1], "free", s1) ||
		!hasStream(l[0], "free", s2) && !hasStream(l[1], "free", s2) {
		t.Errorf("Close made %v, want one free on each stream", l)
	}
	if err := h.ReleaseStream(s2); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("ReleaseStream after Close: %v", err)
	}
}

// Beyond WithWorkspaceStreams, the least recently used stream's workspace
// goes back, on its stream; a refused return is kept and tried again.
func TestWorkspaceStreamsBound(t *testing.T) {
	g := newGPU(t)
	if _, err := blas.Open(g, 0, blas.WithWorkspace(&simResource{g: g}, 4096), blas.WithWorkspaceStreams(0)); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("workspaces for 0 streams: %v", err)
	}
	ss := newStreams(t, g, 3)
	r := &simResource{g: g}
	base := len(g.Leaks())
	h, err := blas.Open(g, 0, blas.WithStream(ss[0]), blas.WithWorkspace(r, 4096), blas.WithWorkspaceStreams(2))
	if err != nil {
		t.Fatal(err)
	}
	open := len(g.Leaks())                                   // the handle and one workspace
	for _, s := range []gpumem.Stream{ss[1], ss[0], ss[2]} { // ss[1] is the least recent at ss[2]
		if err := h.SetStream(s); err != nil {
			t.Fatal(err)
		}
	}
	l := r.take()
	if len(l) != 4 || !hasStream(l[3], "free", ss[1]) {
		t.Fatalf("three streams, two kept: %v; want ss[1]'s freed last", l)
	}
	if n := len(g.Leaks()); n != open+1 {
		t.Errorf("%d live objects with two workspaces kept, want %d", n, open+1)
	}
	r.failFree.Store(1)
	if err := h.SetStream(ss[1]); err != nil { // evicts ss[0]'s: refused, kept
		t.Fatal(err)
	}
	if n := len(g.Leaks()); n != open+2 {
		t.Errorf("%d live objects with the eviction refused, want %d", n, open+2)
	}
	r.take()
	if err := h.SetStream(ss[2]); err != nil { // ss[0]'s is the least recent again
		t.Fatal(err)
	}
	if l := r.take(); len(l) != 1 || !hasStream(l[0], "free", ss[0]) {
		t.Errorf("the next eviction made %v, want ss[0]'s refused workspace freed", l)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(g.Leaks()); n != base {
		t.Errorf("%d live objects after Close, want %d", n, base)
	}
}

// Two streams queue calls from one handle, switched between them with no
// synchronization: each stream's results are its own.
func TestWorkspaceStreamsRunTogether(t *testing.T) {
	g := newGPU(t)
	ss := newStreams(t, g, 2)
	r := &simResource{g: g}
	h := openHandle(t, g, blas.WithWorkspace(r, 1<<16))
	xs := []gpumem.Ptr{upload(t, g, blas.F64, []float64{1, 2}), upload(t, g, blas.F64, []float64{3, 4})}
	for round := range 3 {
		for i, s := range ss {
			if err := h.SetStream(s); err != nil {
				t.Fatal(err)
			}
			if err := h.Dscal(2, float64(i+2), xs[i], 1); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if err := g.DeviceSynchronize(0); err != nil {
		t.Fatal(err)
	}
	if got := download(t, g, blas.F64, xs[0], 2); got[0] != 8 || got[1] != 16 {
		t.Errorf("x0 = %v, want [8 16]", got)
	}
	if got := download(t, g, blas.F64, xs[1], 2); got[0] != 81 || got[1] != 108 {
		t.Errorf("x1 = %v, want [81 108]", got)
	}
	if l := r.take(); len(l) != 3 { // the default stream's, then one each
		t.Errorf("workspaces made: %v", l)
	}
}

func handle(s gpumem.Stream) string { return fmt.Sprintf("%#x", s.Handle) }

// hasStream says whether a logged call is op on s.
func hasStream(entry, op string, s gpumem.Stream) bool {
	var o, p, h string
	if _, err := fmt.Sscan(entry, &o, &p, &h); err != nil {
		return false
	}
	return o == op && h == handle(s)
}

// addr is a logged call's address.
func addr(entry string) string {
	var o, p string
	fmt.Sscan(entry, &o, &p)
	return p
}
