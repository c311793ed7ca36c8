package hip

import (
	"encoding/binary"
	"testing"

	"github.com/gpumem/gpumem/internal/native"
)

// TestAllocPropLayoutByVersion: 5.2 reads compressionType first and type at
// 16; 5.3 onwards the CUDA-like layout (type 0, location 8).
func TestAllocPropLayoutByVersion(t *testing.T) {
	for v, want := range map[int]map[int]uint32{
		50221153: {16: 1, 4: 1, 8: 3},
		50300000: {0: 1, 8: 1, 12: 3},
		50731921: {0: 1, 8: 1, 12: 3},
		60443484: {0: 1, 8: 1, 12: 3},
	} {
		var buf [native.AllocPropSize]byte
		writeAllocProp(&native.Backend{RuntimeVersion: v}, &buf, 3)
		for off, w := range want {
			if g := binary.LittleEndian.Uint32(buf[off:]); g != w {
				t.Errorf("HIP %s: offset %d holds %d, want %d", FormatVersion(v), off, g, w)
			}
		}
	}
}

// TestPoolMaxSizeFrom62: hipMemPoolProps.maxSize exists from 6.2 only.
func TestPoolMaxSizeFrom62(t *testing.T) {
	for v, want := range map[int]bool{50731921: false, 60000000: false, 60100000: false, 60200000: true, 70253211: true} {
		if got := dialect.PoolMaxSize(&native.Backend{RuntimeVersion: v}); got != want {
			t.Errorf("HIP %s: pool max size %v, want %v", FormatVersion(v), got, want)
		}
		ls, _ := ABI(v)
		if _, ok := ls["hipMemPoolProps"].Offsets["maxSize"]; ok != want {
			t.Errorf("HIP %s: ABI's hipMemPoolProps has maxSize: %v, want %v", FormatVersion(v), ok, want)
		}
	}
}
