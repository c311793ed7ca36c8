package collective_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/collective"
	"github.com/gpumem/gpumem/sim"
)

// An all-reduce across two simulated devices: one communicator of two
// ranks, each rank's call queued on a stream of its device.
func Example() {
	g, _ := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, 2)})
	defer g.Close()
	comms, err := collective.InitAll(g, []int{0, 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	const n = 4
	bufs := make([]gpumem.Ptr, 2)
	streams := make([]gpumem.Stream, 2)
	for r := range 2 {
		streams[r], _ = g.StreamCreate(r, gpumem.StreamNonBlocking, 0)
		bufs[r], _ = g.Malloc(r, 4*n)
		host := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32((r+1)*(i+1))))
		}
		_ = g.CopyToDevice(bufs[r], host)
	}
	for r, c := range comms {
		if err := c.AllReduce(bufs[r], bufs[r], n, collective.Float32, collective.Sum, streams[r]); err != nil {
			fmt.Println(err)
			return
		}
	}
	for r, c := range comms {
		_ = g.StreamSynchronize(streams[r])
		host := make([]byte, 4*n)
		_ = g.CopyFromDevice(host, bufs[r])
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(host[4*i:]))
		}
		fmt.Println(c, out)
		_ = c.Close()
		_ = g.Free(r, bufs[r])
		_ = g.StreamDestroy(streams[r])
	}
	// Output:
	// sim comm rank 0 of 2 on device 0 [3 6 9 12]
	// sim comm rank 1 of 2 on device 1 [3 6 9 12]
}

// A ring: every rank sends to the next and receives from the previous, in
// one group so that the sends and receives progress together.
func ExampleGroup() {
	const ranks = 3
	g, _ := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, ranks)})
	defer g.Close()
	comms, _ := collective.InitAll(g, []int{0, 1, 2})
	send, recv := make([]gpumem.Ptr, ranks), make([]gpumem.Ptr, ranks)
	for r := range ranks {
		send[r], _ = g.Malloc(r, 8)
		recv[r], _ = g.Malloc(r, 8)
		_ = g.CopyToDevice(send[r], binary.LittleEndian.AppendUint64(nil, uint64(100+r)))
	}
	err := collective.Group(g, func() error {
		for r, c := range comms {
			s := gpumem.Stream{Device: r} // the device's default stream
			if err := c.Send(send[r], 1, collective.Uint64, (r+1)%ranks, s); err != nil {
				return err
			}
			if err := c.Recv(recv[r], 1, collective.Uint64, (r+ranks-1)%ranks, s); err != nil {
				return err
			}
		}
		return nil
	})
	fmt.Println("group:", err)
	for r := range ranks {
		_ = g.DeviceSynchronize(r)
		b := make([]byte, 8)
		_ = g.CopyFromDevice(b, recv[r])
		fmt.Printf("rank %d received %d\n", r, binary.LittleEndian.Uint64(b))
	}
	// Output:
	// group: <nil>
	// rank 0 received 102
	// rank 1 received 100
	// rank 2 received 101
}
