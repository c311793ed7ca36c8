package telemetry

import (
	"encoding/binary"
	"fmt"
)

// Out-parameters live in heap memory: buffers made here escape (sink), so
// that their address stays valid while C writes through it. They hold no
// Go pointers, and C keeps none of them.

var never bool

//lint:ignore U1000 written (never, in fact) so that escape's argument escapes
var sink any

func escape(x any) {
	if never {
		sink = x
	}
}

func newBytes(n int) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	escape(b)
	return b
}

func newU32() []uint32 { return newU32s(1) }
func newU64() []uint64 { return newU64s(1) }

func newU32s(n int) []uint32 {
	b := make([]uint32, n)
	escape(b)
	return b
}

func newU64s(n int) []uint64 {
	b := make([]uint64, n)
	escape(b)
	return b
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// cstr is the NUL-terminated string at the start of b.
func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// pciAddr is a PCI address (function 0: a GPU's).
type pciAddr struct{ domain, bus, dev uint32 }

// String formats the address as NVML and sysfs write it, "0000:3b:00.0".
func (a pciAddr) String() string { return fmt.Sprintf("%04x:%02x:%02x.0", a.domain, a.bus, a.dev) }
