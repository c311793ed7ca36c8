package collective

import (
	"encoding/binary"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/internal/half"
)

// TestTable: one symbol for both vendors on every row, the argument counts
// the signatures in table.go give, and the binding registered.
func TestTable(t *testing.T) {
	want := map[string]int{"ncclGetVersion": 1, "ncclCommInitAll": 3, "ncclAllReduce": 7, "ncclBroadcast": 7, "ncclReduce": 8,
		"ncclAllGather": 6, "ncclReduceScatter": 7, "ncclSend": 6, "ncclRecv": 6, "ncclCommRegister": 4, "ncclCommGetAsyncError": 2}
	for i, r := range Table.Rows {
		if r.ID != bind.Op(i) || r.Symbol[bind.CUDA] == "" || r.Symbol[bind.CUDA] != r.Symbol[bind.HIP] {
			t.Errorf("row %d: %+v", i, r)
		}
		words, _ := r.Args.Words(bind.CUDA)
		if n, ok := want[r.Symbol[bind.CUDA]]; ok && n != words {
			t.Errorf("%s takes %d words, the table says %d", r.Symbol[bind.CUDA], n, words)
		}
		if !r.Args.Valid(bind.MaxArgs) {
			t.Errorf("%s: arity %v", r.Op, r.Args)
		}
	}
	for _, op := range []bind.Op{opCommInitRankConfig, opCommFinalize, opGetLastError, opCommRegister, opCommDeregister} {
		if r := Table.Rows[op]; r.Required[bind.CUDA] || r.Required[bind.HIP] {
			t.Errorf("%s is required; RCCL 5.4 or older NCCL lacks it", r.Symbol[bind.CUDA])
		}
	}
	b, ok := bind.Lookup("collectives")
	if !ok || b.Libraries[bind.CUDA][0] != NCCL || b.Libraries[bind.HIP][0] != RCCL {
		t.Errorf("binding %+v, %v", b, ok)
	}
	if NCCL.Files[bind.CUDA][0] != "libnccl.so.2" || RCCL.Files[bind.HIP][0] != "librccl.so.1" {
		t.Error("file names")
	}
}

// TestUniqueIDWords checks the words ncclCommInitRank's by-value id is
// passed as on this architecture (see uniqueid_amd64.go, uniqueid_arm64.go).
func TestUniqueIDWords(t *testing.T) {
	var id UniqueID
	for i := range id {
		id[i] = byte(i*7 + 3)
	}
	args, keep := initRankWords(0xc0ffee, 4, 3, &id, 0)
	if w, _ := Table.Rows[opCommInitRank].Args.Words(bind.CUDA); len(args) != w {
		t.Fatalf("%d words, the row says %d", len(args), w)
	}
	if args[0] != 0xc0ffee || args[1] != 4 {
		t.Errorf("comm, nranks = %#x, %d", args[0], args[1])
	}
	switch runtime.GOARCH {
	case "amd64":
		// Registers RDI, RSI, RDX: comm, nranks, rank; the id in the
		// first sixteen stack slots (words 7 to 22).
		if args[2] != 3 || args[3] != 0 || args[4] != 0 || args[5] != 0 {
			t.Errorf("register words %v", args[:6])
		}
		for i := range 16 {
			if w := binary.LittleEndian.Uint64(id[8*i:]); uint64(args[6+i]) != w {
				t.Errorf("stack word %d = %#x, want %#x", i, args[6+i], w)
			}
		}
		cfg, _ := initRankWords(1, 2, 1, &id, 0xabc)
		if len(cfg) != initRankConfigArgs || cfg[3] != 0xabc || cfg[2] != 1 {
			t.Errorf("config words %v", cfg[:6])
		}
	case "arm64":
		// X0, X1, X2 = a pointer to a copy, X3 = rank.
		if args[3] != 3 {
			t.Errorf("rank word %d", args[3])
		}
		cp := (*UniqueID)(*(*unsafe.Pointer)(unsafe.Pointer(&args[2])))
		if cp == &id || *cp != id {
			t.Error("word 2 is not a pointer to a copy of the id")
		}
		cfg, _ := initRankWords(1, 2, 1, &id, 0xabc)
		if len(cfg) != initRankConfigArgs || cfg[4] != 0xabc || cfg[3] != 1 {
			t.Errorf("config words %v", cfg)
		}
	}
	runtime.KeepAlive(keep)
}

func TestVersionString(t *testing.T) {
	for code, want := range map[int]string{22803: "2.28.3", 21304: "2.13.4", 2708: "2.7.8", 22203: "2.22.3"} {
		if got := versionString(code); got != want {
			t.Errorf("versionString(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	if Float32.String() != "float32" || Bfloat16.Size() != 2 || Float64.Size() != 8 || DataType(12).Size() != 0 || DataType(-1).String() != "DataType(-1)" {
		t.Error("DataType names or sizes")
	}
	if Avg.String() != "avg" || Op(9).String() != "Op(9)" {
		t.Error("Op names")
	}
}

// TestHalf: the binary16 and bfloat16 conversions the simulator reduces
// with, round-tripping and rounding to nearest even.
func TestHalf(t *testing.T) {
	for _, f := range []float32{0, 1, -2, 0.5, 65504, 1.0 / 16384, 3.140625, -0.0009765625} {
		if got := half.ToFloat32(half.FromFloat32(f)); got != f {
			t.Errorf("half %v -> %v", f, got)
		}
		if got := half.BToFloat32(half.BFromFloat32(f)); f != 65504 && got != f {
			t.Errorf("bf16 %v -> %v", f, got)
		}
	}
	if h := half.FromFloat32(1 + 1.0/2048); h != 0x3c00 { // a tie: to even
		t.Errorf("1+2^-11 -> %#x", h)
	}
	if h := half.FromFloat32(1e6); h != 0x7c00 {
		t.Errorf("1e6 -> %#x, want +inf", h)
	}
	if b := half.BFromFloat32(1 + 1.0/128 + 1.0/256); b != 0x3f82 { // 1.01171875 ties up to 1.015625
		t.Errorf("bf16 rounding %#x", b)
	}
}
