package native

import (
	"errors"
	"syscall"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/internal/symtab"
)

// getpidLibrary resolves every symbol to C's getpid, which ignores its
// arguments: calls through it are harmless and answer the process id.
type getpidLibrary struct{ addr uintptr }

func (l getpidLibrary) Path() string                { return "getpid" }
func (l getpidLibrary) Sym(string) (uintptr, error) { return l.addr, nil }
func (l getpidLibrary) Close() error                { return nil }

// Raw passes exactly the row's argument words for the backend's vendor,
// and refuses any other count before calling.
func TestRawChecksArgs(t *testing.T) {
	libc, err := dl.Open("libc.so.6")
	if err != nil {
		t.Skip("no libc.so.6: ", err)
	}
	defer libc.Close()
	addr, err := libc.Sym("getpid")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []symtab.Vendor{symtab.CUDA, symtab.HIP} {
		d := &Dialect{Vendor: v, Name: v.String()}
		b, err := Load(d, func(...string) (Library, error) { return getpidLibrary{addr}, nil }, "getpid")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			op   symtab.Op
			args []uintptr
			ok   bool
		}{
			{symtab.Init, []uintptr{0}, true},
			{symtab.Init, nil, false},
			{symtab.DeviceSynchronize, nil, true},
			{symtab.DeviceSynchronize, []uintptr{0}, false},
			{symtab.GetErrorName, []uintptr{1}, v == symtab.HIP},
			{symtab.GetErrorName, []uintptr{1, 0}, v == symtab.CUDA},
			{symtab.MemPoolSetAccess, []uintptr{0, 0, 0, 0, 0, 0, 0}, false},
		} {
			r, err := b.Raw(tc.op, tc.args...)
			if tc.ok && (err != nil || int(int32(r)) != syscall.Getpid()) {
				t.Errorf("%s: Raw(%s, %d words) = %d, %v", v, symtab.Driver.Rows[tc.op].Op, len(tc.args), r, err)
			}
			if !tc.ok && !errors.Is(err, gpumem.ErrInvalidValue) {
				t.Errorf("%s: Raw(%s, %d words): %v, want ErrInvalidValue", v, symtab.Driver.Rows[tc.op].Op, len(tc.args), err)
			}
		}
	}
}
