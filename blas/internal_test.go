package blas

import (
	"math"
	"testing"

	"github.com/gpumem/gpumem/bind"
)

// The three tables have the same rows in op order, each naming its own
// vendor's column; the routines' rows take the same argument words in
// every library (the libraries copy cuBLAS's signatures), GemmEx aside.
func TestTables(t *testing.T) {
	tabs := []struct {
		lib *bind.Library
		v   bind.Vendor
		d   []dialect
	}{
		{CUBLAS, bind.CUDA, []dialect{cublasDialect}},
		{HIPBLAS, bind.HIP, []dialect{hipblasDialectV1, hipblasDialectV2, hipblasDialectV3}},
		{ROCBLAS, bind.HIP, []dialect{rocblasDialect}},
	}
	for _, tab := range tabs {
		rows := tab.lib.Table.Rows
		if len(rows) != int(numOps) {
			t.Fatalf("%s: %d rows, want %d", tab.lib.Name, len(rows), numOps)
		}
		other := 1 - tab.v
		for i, r := range rows {
			if r.Op != opNames[i] || r.ID != bind.Op(i) {
				t.Errorf("%s: row %d is %s (%d), want %s", tab.lib.Name, i, r.Op, r.ID, opNames[i])
			}
			if r.Symbol[other] != "" || r.Required[other] {
				t.Errorf("%s: row %s names the other vendor", tab.lib.Name, r.Op)
			}
			if r.Symbol[tab.v] == "" {
				continue
			}
			want := cublasTable.Rows[i].Args
			if bind.Op(i) == opGemmEx && tab.lib == ROCBLAS {
				want = bind.Args(24)
			}
			if bind.Op(i) == opGemmExV2 {
				want = bind.Args(19)
			}
			if bind.Op(i) == opVersion || bind.Op(i) == opVersionSize {
				continue // the version queries differ
			}
			if r.Args != want {
				t.Errorf("%s: %s takes %d words, want %d", tab.lib.Name, r.Symbol[tab.v], r.Args, want)
			}
		}
		for _, d := range tab.d {
			if d.trans[NoTrans] == d.trans[Trans] || d.pointer[Host] == d.pointer[Device] || d.exShape == exNone {
				t.Errorf("%s: dialect %+v", tab.lib.Name, d)
			}
			if d.exType[F16] == d.exType[BF16] || d.exType[F16] == d.exType[F32] {
				t.Errorf("%s: GemmEx types %v", tab.lib.Name, d.exType)
			}
		}
	}
}

func TestHalfConversions(t *testing.T) {
	for _, c := range []struct {
		f    float32
		h    uint16
		back float32
	}{
		{0, 0, 0},
		{1, 0x3c00, 1},
		{-2, 0xc000, -2},
		{65504, 0x7bff, 65504},
		{65520, 0x7c00, float32(math.Inf(1))}, // rounds up to Inf
		{1e-8, 0, 0},
		{5.960464477539063e-08, 0x0001, 5.960464477539063e-08}, // smallest subnormal
		{6.097555160522461e-05, 0x03ff, 6.097555160522461e-05}, // largest subnormal
		{1 + 1.0/2048, 0x3c00, 1},                              // a tie rounds to even
		{1 + 3.0/2048, 0x3c02, 1 + 2.0/1024},                   // a tie rounds to even, up
		{float32(math.Inf(-1)), 0xfc00, float32(math.Inf(-1))},
	} {
		if h := F16FromFloat32(c.f); h != c.h {
			t.Errorf("F16FromFloat32(%v) = %#x, want %#x", c.f, h, c.h)
		}
		if b := F16ToFloat32(c.h); b != c.back {
			t.Errorf("F16ToFloat32(%#x) = %v, want %v", c.h, b, c.back)
		}
	}
	if !math.IsNaN(float64(F16ToFloat32(F16FromFloat32(float32(math.NaN()))))) {
		t.Error("f16 NaN is lost")
	}
	// Every half value survives the round trip.
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if back := F16FromFloat32(f); back != uint16(h) && !(f == 0 && back&0x7fff == 0) {
			t.Fatalf("f16 %#x -> %v -> %#x", h, f, back)
		}
	}
	for _, c := range []struct {
		f float32
		h uint16
	}{{1, 0x3f80}, {-2, 0xc000}, {1 + 1.0/256, 0x3f80}, {1 + 3.0/256, 0x3f82}, {3.4e38, 0x7f80}} {
		if h := BF16FromFloat32(c.f); h != c.h {
			t.Errorf("BF16FromFloat32(%v) = %#x, want %#x", c.f, h, c.h)
		}
	}
	if !math.IsNaN(float64(BF16ToFloat32(BF16FromFloat32(float32(math.NaN()))))) {
		t.Error("bf16 NaN is lost")
	}
}
