package sim_test

import (
	"bytes"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func TestSmoke(t *testing.T) {
	for _, manual := range []bool{false, true} {
		g, err := sim.New(sim.Config{Manual: manual})
		if err != nil {
			t.Fatal(err)
		}
		p, err := g.Malloc(0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := g.StreamCreate(0, 0, 0)
		q, err := g.MallocAsync(4096, s)
		if err != nil {
			t.Fatal(err)
		}
		in := bytes.Repeat([]byte{7}, 1000)
		if err := g.CopyToDevice(p, in); err != nil {
			t.Fatal(err)
		}
		if err := g.MemcpyAsync(q, p, 1000, s); err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 1000)
		if err := g.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		if err := g.CopyFromDevice(out, q); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(in, out) {
			t.Fatal("mismatch")
		}
		if err := g.FreeAsync(q, s); err != nil {
			t.Fatal(err)
		}
		if err := g.Free(0, p); err != nil {
			t.Fatal(err)
		}
		if err := g.Free(0, p); err == nil {
			t.Fatal("double free")
		}
		g.StreamSynchronize(s)
		g.StreamDestroy(s)
		if l := g.Leaks(); len(l) != 0 {
			t.Fatal(l)
		}
		_ = gpumem.ErrClosed
	}
}
