package sim_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// FuzzOps drives the simulator with arbitrary sequences of calls and
// arguments, valid and not: nothing may panic, every error must match a
// sentinel, and memory accounting must stay within capacity.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 7, 3, 2, 9, 9, 9, 12, 13, 1, 4, 4, 4, 4, 0, 16, 17})
	f.Add([]byte{14, 6, 1, 0, 2, 255, 255, 255, 255, 255, 255, 255, 255, 15, 3, 3})
	f.Fuzz(fuzzOps)
}

func fuzzOps(t *testing.T, data []byte) {
	{
		g, err := sim.New(sim.Config{Manual: len(data)%2 == 0, Devices: []sim.DeviceConfig{{Capacity: 256 << 20}, {Capacity: 64 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		var ptrs []gpumem.Ptr
		streams := []gpumem.Stream{{Device: 0}, {Device: 1}}
		var events []gpumem.Event
		next := func() uint64 {
			if len(data) == 0 {
				return 0
			}
			n := min(len(data), 8)
			var b [8]byte
			copy(b[:], data[:n])
			data = data[n:]
			return binary.LittleEndian.Uint64(b[:])
		}
		pick := func() gpumem.Ptr {
			if len(ptrs) == 0 {
				return gpumem.Ptr(next())
			}
			return ptrs[int(next()%uint64(len(ptrs)))].Add(next() % 8192)
		}
		stream := func() gpumem.Stream { return streams[int(next()%uint64(len(streams)))] }
		check := func(err error) {
			if err == nil {
				return
			}
			for _, s := range []error{gpumem.ErrInvalidValue, gpumem.ErrOutOfMemory, gpumem.ErrNotSupported, gpumem.ErrClosed} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error matching no sentinel: %v", err)
		}
		for steps := 0; len(data) > 0 && steps < 200; steps++ {
			op := data[0]
			data = data[1:]
			size := next() % (96 << 20)
			switch op % 20 {
			case 0:
				p, err := g.Malloc(int(next()%3), size)
				check(err)
				if err == nil {
					ptrs = append(ptrs, p)
				}
			case 1:
				check(g.Free(int(next()%2), pick()))
			case 2:
				p, err := g.MallocAsync(size, stream())
				check(err)
				if err == nil {
					ptrs = append(ptrs, p)
				}
			case 3:
				check(g.FreeAsync(pick(), stream()))
			case 4:
				check(g.MemsetAsync(pick(), byte(size), size%100000, stream()))
			case 5:
				check(g.MemcpyAsync(pick(), pick(), size%100000, stream()))
			case 6:
				s, err := g.StreamCreate(int(next()%2), gpumem.StreamFlags(next()%3), 0)
				check(err)
				if err == nil {
					streams = append(streams, s)
				}
			case 7:
				check(g.StreamSynchronize(stream()))
			case 8:
				e, err := g.EventCreate(int(next()%2), 0)
				check(err)
				if err == nil {
					events = append(events, e)
				}
			case 9:
				if len(events) > 0 {
					e := events[int(next()%uint64(len(events)))]
					check(g.EventRecord(e, stream()))
					check(g.StreamWaitEvent(stream(), e))
				}
			case 10:
				check(g.StreamBeginCapture(stream(), gpumem.CaptureMode(next()%4)))
			case 11:
				gr, err := g.StreamEndCapture(stream())
				check(err)
				if err == nil {
					ge, err := g.GraphInstantiate(gr)
					check(err)
					if err == nil {
						check(g.GraphLaunch(ge, stream()))
						check(g.GraphExecDestroy(ge))
					}
					check(g.GraphDestroy(gr))
				}
			case 12:
				check(g.Launch(stream(), pick(), size%10000, func(m []byte) {
					if len(m) > 0 {
						m[0]++
					}
				}))
			case 13:
				g.Step(stream())
			case 14:
				p, err := g.MallocManaged(0, size)
				check(err)
				if err == nil {
					ptrs = append(ptrs, p)
				}
			case 15:
				check(g.Prefetch(pick(), size, gpumem.DeviceLocation(int(next()%3)), stream()))
			case 16:
				check(g.Tag(pick(), size%100000, next()))
			case 17:
				check(g.Untag(pick()))
			case 18:
				check(g.DeviceSynchronize(int(next() % 3)))
			case 19:
				_, err := g.MemAddressReserve(size, next())
				check(err)
			}
			for dev := 0; dev < 2; dev++ {
				free, total, err := g.MemInfo(dev)
				if err != nil || free > total {
					t.Fatalf("MemInfo(%d) = %d, %d, %v", dev, free, total, err)
				}
			}
		}
		check(g.Drain())
		_ = g.Leaks()
		_ = g.Violations()
		check(g.Close())
	}
}
