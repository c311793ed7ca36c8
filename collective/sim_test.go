package collective

import (
	"fmt"
	"testing"

	"github.com/gpumem/gpumem"
)

const count = 37 // elements per rank: not a multiple of anything

// checkElems compares got (elements of dt) with want(i) element by element.
func checkElems(t *testing.T, what string, dt DataType, got []byte, want func(i int) float64) {
	t.Helper()
	vs := decode(dt, got)
	bad := 0
	for i, v := range vs {
		if w := want(i); v != w {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, v, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements wrong", what, bad, len(vs))
	}
}

// TestReductions runs AllReduce, Reduce and ReduceScatter for every type
// and reduction on 2 and 4 devices, and checks every element of every
// rank.
func TestReductions(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := newMachine(t, n, false)
			cs := m.comms(t)
			for _, dt := range allTypes {
				for _, op := range allOps {
					sz := uint64(dt.Size())
					send, recv, rsSend, rsRecv := make([]gpumem.Ptr, n), make([]gpumem.Ptr, n), make([]gpumem.Ptr, n), make([]gpumem.Ptr, n)
					for r := range n {
						send[r], recv[r] = m.alloc(t, r, count*sz), m.alloc(t, r, count*sz)
						m.put(t, send[r], inputs(dt, r, count))
						rsSend[r], rsRecv[r] = m.alloc(t, r, uint64(n)*count*sz), m.alloc(t, r, count*sz)
						m.put(t, rsSend[r], inputs(dt, r, n*count))
					}
					root := n - 1
					redRecv := m.alloc(t, root, count*sz)
					for r, c := range cs {
						if err := c.AllReduce(send[r], recv[r], count, dt, op, m.streams[r]); err != nil {
							t.Fatal(err)
						}
						rp := gpumem.Ptr(0)
						if r == root {
							rp = redRecv
						}
						if err := c.Reduce(send[r], rp, count, dt, op, root, m.streams[r]); err != nil {
							t.Fatal(err)
						}
						if err := c.ReduceScatter(rsSend[r], rsRecv[r], count, dt, op, m.streams[r]); err != nil {
							t.Fatal(err)
						}
					}
					m.sync(t)
					what := fmt.Sprintf("%v %v", dt, op)
					for r := range n {
						checkElems(t, what+fmt.Sprintf(" AllReduce rank %d", r), dt, m.get(t, recv[r], count*sz), func(i int) float64 { return expect(dt, op, n, i) })
						checkElems(t, what+fmt.Sprintf(" ReduceScatter rank %d", r), dt, m.get(t, rsRecv[r], count*sz), func(i int) float64 { return expect(dt, op, n, r*count+i) })
					}
					checkElems(t, what+" Reduce", dt, m.get(t, redRecv, count*sz), func(i int) float64 { return expect(dt, op, n, i) })
				}
			}
		})
	}
}

// TestCopies runs Broadcast, AllGather and an in-place AllReduce for every
// type on 2 and 4 devices.
func TestCopies(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := newMachine(t, n, false)
			cs := m.comms(t)
			for _, dt := range allTypes {
				sz := uint64(dt.Size())
				root := 1
				send, bc, ag, inplace := make([]gpumem.Ptr, n), make([]gpumem.Ptr, n), make([]gpumem.Ptr, n), make([]gpumem.Ptr, n)
				for r := range n {
					send[r], bc[r], ag[r] = m.alloc(t, r, count*sz), m.alloc(t, r, count*sz), m.alloc(t, r, uint64(n)*count*sz)
					inplace[r] = m.alloc(t, r, count*sz)
					m.put(t, send[r], inputs(dt, r, count))
					m.put(t, inplace[r], inputs(dt, r, count))
				}
				for r, c := range cs {
					if err := c.Broadcast(send[r], bc[r], count, dt, root, m.streams[r]); err != nil {
						t.Fatal(err)
					}
					if err := c.AllGather(send[r], ag[r], count, dt, m.streams[r]); err != nil {
						t.Fatal(err)
					}
					if err := c.AllReduce(inplace[r], inplace[r], count, dt, Max, m.streams[r]); err != nil {
						t.Fatal(err)
					}
				}
				m.sync(t)
				for r := range n {
					checkElems(t, fmt.Sprintf("%v Broadcast rank %d", dt, r), dt, m.get(t, bc[r], count*sz), func(i int) float64 { return value(dt, root, i) })
					checkElems(t, fmt.Sprintf("%v AllGather rank %d", dt, r), dt, m.get(t, ag[r], uint64(n)*count*sz), func(i int) float64 { return value(dt, i/count, i%count) })
					checkElems(t, fmt.Sprintf("%v in-place AllReduce rank %d", dt, r), dt, m.get(t, inplace[r], count*sz), func(i int) float64 { return expect(dt, Max, n, i) })
				}
			}
		})
	}
}

// TestInPlaceGather: AllGather with send inside recv at the rank's block,
// and ReduceScatter with recv inside send.
func TestInPlaceGather(t *testing.T) {
	const n = 4
	m := newMachine(t, n, false)
	cs := m.comms(t)
	dt := Int32
	sz := uint64(4)
	buf := make([]gpumem.Ptr, n)
	for r := range n {
		buf[r] = m.alloc(t, r, n*count*sz)
		m.put(t, buf[r].Add(uint64(r)*count*sz), inputs(dt, r, count))
	}
	for r, c := range cs {
		if err := c.AllGather(buf[r].Add(uint64(r)*count*sz), buf[r], count, dt, m.streams[r]); err != nil {
			t.Fatal(err)
		}
	}
	m.sync(t)
	for r := range n {
		checkElems(t, fmt.Sprintf("in-place AllGather rank %d", r), dt, m.get(t, buf[r], n*count*sz), func(i int) float64 { return value(dt, i/count, i%count) })
	}
}
