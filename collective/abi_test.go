package collective

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gpumem/gpumem/bind"
)

// idByValEnv names the shared library built from testdata/idbyval.c for
// the test binary's architecture (.ci/libs-collectives.sh builds it for
// arm64 with aarch64-linux-gnu-gcc and runs this test under qemu). Without
// it the test builds the library with the host's gcc, if there is one.
const idByValEnv = "GPUMEM_IDBYVAL_LIB"

// idReceived mirrors struct received in testdata/idbyval.c.
type idReceived struct {
	calls, nranks, rank int64
	hash                uint64
	first, last         int64
	config              uint64
}

// TestUniqueIDByValueC checks against C functions with ncclCommInitRank's
// and ncclCommInitRankConfig's parameter lists, compiled by a C compiler,
// that the words initRankWords lays out deliver the 128-byte id by value,
// with nranks, rank and config, on this architecture's C ABI.
func TestUniqueIDByValueC(t *testing.T) {
	path := os.Getenv(idByValEnv)
	if path == "" {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			t.Skipf("%s is not set and there is no gcc to build testdata/idbyval.c", idByValEnv)
		}
		path = filepath.Join(t.TempDir(), "idbyval.so")
		if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", path, "testdata/idbyval.c").CombinedOutput(); err != nil {
			t.Skipf("gcc cannot build testdata/idbyval.c here: %v\n%s", err, out)
		}
	}
	lib := &bind.Library{
		Name:  "idbyval",
		Files: [bind.NumVendors][]string{bind.CUDA: {path}},
		Table: bind.NewTable("idbyval",
			bind.Func{Op: "InitRank", Symbol: bind.Symbols("ncclCommInitRank", ""), Args: bind.Args(initRankArgs), Required: bind.CUDAOnly},
			bind.Func{Op: "InitRankConfig", Symbol: bind.Symbols("ncclCommInitRankConfig", ""), Args: bind.Args(initRankConfigArgs), Required: bind.CUDAOnly},
			bind.Func{Op: "Received", Symbol: bind.Symbols("idbyval_received", ""), Args: bind.Args(1), Required: bind.CUDAOnly},
		),
	}
	l, err := bind.Open(lib, bind.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var id UniqueID
	for i := range id {
		id[i] = byte(i*37 + 11)
	}
	h := uint64(1469598103934665603)
	for _, b := range id {
		h ^= uint64(b)
		h *= 1099511628211
	}
	for _, config := range []uintptr{0, 0xc0f19} {
		out := new(uintptr)
		escape(out)
		args, keep := initRankWords(uintptr(unsafe.Pointer(out)), 5, 3, &id, config)
		op := bind.Op(0)
		if config != 0 {
			op = 1
		}
		err := l.Check(op, args...)
		runtime.KeepAlive(keep)
		runtime.KeepAlive(out)
		if err != nil {
			t.Fatal(err)
		}
		got := new(idReceived)
		escape(got)
		if _, err := l.Call(2, uintptr(unsafe.Pointer(got))); err != nil {
			t.Fatal(err)
		}
		want := idReceived{calls: got.calls, nranks: 5, rank: 3, hash: h, first: int64(id[0]), last: int64(id[127]), config: uint64(config)}
		if *got != want || *out != 0x5eed {
			t.Errorf("%s, config %#x: C received %+v (comm %#x), want %+v", runtime.GOARCH, config, *got, *out, want)
		}
	}
}
