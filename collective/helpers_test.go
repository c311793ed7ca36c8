package collective

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/half"
	"github.com/gpumem/gpumem/sim"
)

// machine is a simulated GPU of n devices with a stream on each.
type machine struct {
	g       *sim.GPU
	streams []gpumem.Stream
}

func newMachine(t *testing.T, n int, manual bool) *machine {
	t.Helper()
	g, err := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, n), Manual: manual})
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{g: g}
	for d := range n {
		s, err := g.StreamCreate(d, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		m.streams = append(m.streams, s)
	}
	t.Cleanup(func() {
		for _, v := range g.Violations() {
			t.Errorf("violation: %v", v)
		}
		g.Close()
	})
	return m
}

func (m *machine) devs() []int {
	d := make([]int, len(m.streams))
	for i := range d {
		d[i] = i
	}
	return d
}

func (m *machine) comms(t *testing.T) []*Comm {
	t.Helper()
	cs, err := InitAll(m.g, m.devs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return cs
}

func (m *machine) alloc(t *testing.T, dev int, size uint64) gpumem.Ptr {
	t.Helper()
	p, err := m.g.Malloc(dev, max(size, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.g.Free(dev, p) })
	return p
}

func (m *machine) put(t *testing.T, p gpumem.Ptr, b []byte) {
	t.Helper()
	if err := m.g.CopyToDevice(p, b); err != nil {
		t.Fatal(err)
	}
}

func (m *machine) get(t *testing.T, p gpumem.Ptr, n uint64) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := m.g.CopyFromDevice(b, p); err != nil {
		t.Fatal(err)
	}
	return b
}

func (m *machine) sync(t *testing.T) {
	t.Helper()
	for _, s := range m.streams {
		if err := m.g.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
	}
}

// value is element i of rank r's input: small integers (negative in some
// places for signed types), so that every reduction of up to four ranks is
// exact in every type.
func value(dt DataType, r, i int) float64 {
	v := float64((r+i)%3 + 1)
	switch dt {
	case Uint8, Uint32, Uint64:
		return v
	}
	if i%4 == 3 {
		return -v
	}
	return v
}

// encode writes vs as elements of dt.
func encode(dt DataType, vs []float64) []byte {
	sz := dt.Size()
	b := make([]byte, len(vs)*sz)
	for i, v := range vs {
		e := b[i*sz:]
		switch dt {
		case Int8, Uint8:
			e[0] = byte(int8(v))
		case Int32, Uint32:
			binary.LittleEndian.PutUint32(e, uint32(int32(v)))
		case Int64, Uint64:
			binary.LittleEndian.PutUint64(e, uint64(int64(v)))
		case Float32:
			binary.LittleEndian.PutUint32(e, math.Float32bits(float32(v)))
		case Float64:
			binary.LittleEndian.PutUint64(e, math.Float64bits(v))
		case Float16:
			binary.LittleEndian.PutUint16(e, half.FromFloat32(float32(v)))
		case Bfloat16:
			binary.LittleEndian.PutUint16(e, half.BFromFloat32(float32(v)))
		}
	}
	return b
}

// decode reads elements of dt as float64.
func decode(dt DataType, b []byte) []float64 {
	sz := dt.Size()
	vs := make([]float64, len(b)/sz)
	for i := range vs {
		e := b[i*sz:]
		switch dt {
		case Int8:
			vs[i] = float64(int8(e[0]))
		case Uint8:
			vs[i] = float64(e[0])
		case Int32:
			vs[i] = float64(int32(binary.LittleEndian.Uint32(e)))
		case Uint32:
			vs[i] = float64(binary.LittleEndian.Uint32(e))
		case Int64:
			vs[i] = float64(int64(binary.LittleEndian.Uint64(e)))
		case Uint64:
			vs[i] = float64(binary.LittleEndian.Uint64(e))
		case Float32:
			vs[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(e)))
		case Float64:
			vs[i] = math.Float64frombits(binary.LittleEndian.Uint64(e))
		case Float16:
			vs[i] = float64(half.ToFloat32(binary.LittleEndian.Uint16(e)))
		case Bfloat16:
			vs[i] = float64(half.BToFloat32(binary.LittleEndian.Uint16(e)))
		}
	}
	return vs
}

func isFloat(dt DataType) bool {
	return dt == Float16 || dt == Float32 || dt == Float64 || dt == Bfloat16
}

// expect is the reduction of the ranks' element i, computed on its own.
func expect(dt DataType, op Op, n, i int) float64 {
	acc := value(dt, 0, i)
	for r := 1; r < n; r++ {
		v := value(dt, r, i)
		switch op {
		case Sum, Avg:
			acc += v
		case Prod:
			acc *= v
		case Max:
			acc = math.Max(acc, v)
		case Min:
			acc = math.Min(acc, v)
		}
	}
	if op == Avg {
		acc /= float64(n)
		if !isFloat(dt) {
			acc = math.Trunc(acc)
		}
	}
	return acc
}

func inputs(dt DataType, r, count int) []byte {
	vs := make([]float64, count)
	for i := range vs {
		vs[i] = value(dt, r, i)
	}
	return encode(dt, vs)
}

var allTypes = []DataType{Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, Bfloat16}
var allOps = []Op{Sum, Prod, Max, Min, Avg}
