package symtab

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
)

func TestRowsInOpOrder(t *testing.T) {
	for i, r := range Rows {
		if int(r.ID) != i {
			t.Errorf("Rows[%d] is %s with ID %d", i, r.Op, r.ID)
		}
		if r.Op == "" {
			t.Errorf("Rows[%d] has no operation name", i)
		}
	}
}

// Every Backend method that reaches the vendor library has a row; the ones
// listed here are answered by the backend itself or through another row.
func TestEveryVendorMethodHasARow(t *testing.T) {
	own := map[string]string{
		"Name": "", "Library": "", "Close": "",
		"CopyToDevice": "Memcpy", "CopyFromDevice": "Memcpy",
	}
	ops := map[string]bool{}
	for _, r := range Rows {
		ops[r.Op] = true
	}
	bt := reflect.TypeOf((*gpumem.Backend)(nil)).Elem()
	for i := 0; i < bt.NumMethod(); i++ {
		m := bt.Method(i).Name
		if via, ok := own[m]; ok {
			if via != "" && !ops[via] {
				t.Errorf("%s goes through %s, which has no row", m, via)
			}
			continue
		}
		if !ops[m] {
			t.Errorf("Backend.%s has no row in the symbol table", m)
		}
	}
}

func TestSymbolsUniqueAndWellFormed(t *testing.T) {
	for _, v := range []struct {
		vendor Vendor
		prefix string
	}{{CUDA, "cu"}, {HIP, "hip"}} {
		seen := map[string]string{}
		for _, r := range Rows {
			s := r.Symbol(v.vendor)
			if s == "" {
				if r.Required(v.vendor) {
					t.Errorf("%s is required but has no symbol", r.Op)
				}
				continue
			}
			if !strings.HasPrefix(s, v.prefix) || strings.ContainsAny(s, " \t") {
				t.Errorf("%s: symbol %q does not look like a %s symbol", r.Op, s, v.prefix)
			}
			if prev, dup := seen[s]; dup {
				t.Errorf("symbol %s appears for %s and %s", s, prev, r.Op)
			}
			seen[s] = r.Op
		}
	}
}

func TestCUDABaseNames(t *testing.T) {
	for _, c := range []struct{ sym, base string }{
		{"cuMemAlloc_v2", "cuMemAlloc"},
		{"cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo"},
		{"cuMemAllocAsync", "cuMemAllocAsync"},
	} {
		if got := (Row{CUDA: c.sym}).CUDABase(); got != c.base {
			t.Errorf("CUDABase(%s) = %s, want %s", c.sym, got, c.base)
		}
	}
	for _, r := range Rows {
		if r.CUDA != "" && r.CUDAVersion < 2000 {
			t.Errorf("%s: CUDA version %d is not a CUDA version", r.CUDA, r.CUDAVersion)
		}
	}
}
