package symtab

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
)

func TestRowsInOpOrder(t *testing.T) {
	for i, r := range Driver.Rows {
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
	for _, r := range Driver.Rows {
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

// Every Kernels method has a row, optional for both vendors (old libraries
// still open).
func TestEveryKernelsMethodHasARow(t *testing.T) {
	kt := reflect.TypeOf((*gpumem.Kernels)(nil)).Elem()
	for i := 0; i < kt.NumMethod(); i++ {
		m := kt.Method(i).Name
		r, ok := Driver.ByName(m)
		if !ok {
			t.Errorf("gpumem.Kernels.%s has no row", m)
			continue
		}
		if r.Required[CUDA] || r.Required[HIP] {
			t.Errorf("%s is required; kernel rows are optional", m)
		}
	}
}

func TestSymbolsUniqueAndWellFormed(t *testing.T) {
	for _, v := range []struct {
		vendor Vendor
		prefix string
	}{{CUDA, "cu"}, {HIP, "hip"}} {
		seen := map[string]string{}
		for _, r := range Driver.Rows {
			s := r.Symbol[v.vendor]
			if s == "" {
				if r.Required[v.vendor] {
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
		r := Row{}
		r.Symbol[CUDA] = c.sym
		if got := r.Base(CUDA); got != c.base {
			t.Errorf("Base(%s) = %s, want %s", c.sym, got, c.base)
		}
	}
	for _, r := range Driver.Rows {
		if r.Symbol[CUDA] != "" && r.ABI[CUDA] < 2000 {
			t.Errorf("%s: CUDA version %d is not a CUDA version", r.Symbol[CUDA], r.ABI[CUDA])
		}
	}
}

// The rows with no symbol for any vendor are the operations the backends
// answer themselves; they are never required.
func TestOwnOperationsHaveNoSymbol(t *testing.T) {
	own := map[Op]bool{Name: true, Library: true, Close: true, CopyToDevice: true, CopyFromDevice: true, Launch: true}
	for _, r := range Driver.Rows {
		empty := true
		for v := Vendor(0); v < NumVendors; v++ {
			if r.Symbol[v] != "" {
				empty = false
			}
			if r.Symbol[v] == "" && r.Required[v] {
				t.Errorf("%s is required for %s without a symbol", r.Op, v)
			}
		}
		if empty != own[r.ID] {
			t.Errorf("%s: no symbol for any vendor is %v, want %v", r.Op, empty, own[r.ID])
		}
	}
}
