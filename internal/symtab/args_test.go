package symtab

import (
	"strings"
	"testing"
)

// nativeMaxArgs is the widest call of the native backend (CallPre12); the
// binding package passes up to 24.
const nativeMaxArgs = 12

// Every vendor symbol of the project's tables declares its argument words
// (a function of no arguments as NoArgs, never as 0, which means
// "undeclared"); a vendor without a symbol declares none; and a row whose
// vendors differ says so in its notes. The header tests check the counts
// against the vendors' prototypes.
func TestArgsDeclared(t *testing.T) {
	for _, tab := range []*Table{&Driver, &RTC} {
		for _, r := range tab.Rows {
			if !r.Args.Valid(nativeMaxArgs) {
				t.Errorf("%s.%s: argument words %v out of range", tab.Name, r.Op, [NumVendors]int(r.Args))
			}
			for v := Vendor(0); v < NumVendors; v++ {
				_, declared := r.Args.Words(v)
				if declared != (r.Symbol[v] != "") {
					t.Errorf("%s.%s: %s symbol %q, argument words declared: %v", tab.Name, r.Op, v, r.Symbol[v], declared)
				}
			}
			c, cok := r.Args.Words(CUDA)
			h, hok := r.Args.Words(HIP)
			differ := cok && hok && c != h
			if differ != strings.Contains(r.Notes, "Vendors differ") {
				t.Errorf("%s.%s: %s and %s take %v; the notes (%q) must say \"Vendors differ\" exactly when they do", tab.Name, r.Op, r.Symbol[CUDA], r.Symbol[HIP], r.Args, r.Notes)
			}
		}
	}
	// The functions of no arguments are declared as such.
	for _, op := range []Op{DeviceSynchronize} {
		r := &Driver.Rows[op]
		if n, ok := r.Args.Words(CUDA); !ok || n != 0 || r.Args != Args(0) {
			t.Errorf("%s takes no arguments; Args is %v", r.Op, [NumVendors]int(r.Args))
		}
	}
}

func TestArity(t *testing.T) {
	for _, tc := range []struct {
		a    Arity
		str  string
		cuda int
		ok   bool
	}{
		{Args(3), "3", 3, true},
		{Args(0), "none", 0, true},
		{ArgsPer(3, 4), "cuda 3, hip 4", 3, true},
		{ArgsPer(0, 2), "cuda none, hip 2", 0, true},
		{Arity{}, "?", 0, false},
		{Arity{0, 1}, "cuda ?, hip 1", 0, false},
	} {
		n, ok := tc.a.Words(CUDA)
		if n != tc.cuda || ok != tc.ok || tc.a.String() != tc.str {
			t.Errorf("%v: Words(CUDA) = %d, %v; String %q; want %d, %v, %q", [NumVendors]int(tc.a), n, ok, tc.a, tc.cuda, tc.ok, tc.str)
		}
		if ref := tc.a.Ref(CUDA); (ref != nil) != ok || (ref != nil && *ref != n) {
			t.Errorf("%v: Ref(CUDA) = %v", [NumVendors]int(tc.a), ref)
		}
	}
	if _, ok := Args(2).Words(NumVendors); ok {
		t.Error("Words of an unknown vendor declared")
	}
	if Args(0)[HIP] != NoArgs || !Args(0).Valid(1) || Args(3).Valid(2) || (Arity{-2, 1}).Valid(5) {
		t.Error("Valid or Args(0) is wrong")
	}
}
