package abitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// TestCompileCompare runs the header check against a small header of its own.
func TestCompileCompare(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: ", err)
	}
	inc := t.TempDir()
	h := "typedef struct { int a; long long b; } S;\nenum { K = 7 };\n"
	if err := os.WriteFile(filepath.Join(inc, "v.h"), []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	layouts := map[string]gpumem.StructLayout{"S": {Size: 16, Offsets: map[string]int{"a": 0, "b": 8}}}
	consts := map[string]int64{"K": 7}
	got := Compile(t, gcc, inc, "#include <v.h>\n", layouts, consts)
	if bad := Compare(t, "v.h", got, layouts, consts); bad != 0 {
		t.Fatalf("%d differ", bad)
	}
}

// TestPrototypes reads the argument words of a small header's functions:
// f(void), a callback parameter, structs by value of one and two words, a
// name the header renames with #define, calls inside a function body and
// function pointers in a struct (neither of which is a declaration), and a
// function declared with no parameter names.
func TestPrototypes(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: ", err)
	}
	inc := t.TempDir()
	h := `#define API
typedef struct { int type; int id; } Loc;
typedef struct { long long a; long long b; } Two;
typedef struct Stream_st *Stream;
#define fnRenamed fnRenamed_v2
int API fnVoid(void);
int API fnCallback(void (*cb)(void *, int), void *user, unsigned int flags);
int API fnLoc(const void *p, unsigned long n, Loc loc, Stream s);
int API fnTwo(Two t, int x[4]);
int API fnRenamed(int a, int b);
int API fnUnnamed(int, unsigned long long, Stream);
__attribute__((deprecated("use fnVoid(void) instead"))) int API fnOld(int a);
struct Table { int (*fnVoid)(int, int, int); };
static inline int wrapper(int a) { return fnRenamed(a, fnOld(a)); }
`
	if err := os.WriteFile(filepath.Join(inc, "p.h"), []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	prelude := "#include <p.h>\n"
	names := []string{"fnVoid", "fnCallback", "fnLoc", "fnTwo", "fnRenamed", "fnRenamed_v2", "fnUnnamed", "fnOld", "fnMissing"}
	protos := Prototypes(t, gcc, inc, prelude, names)
	got := Words(t, gcc, inc, prelude, protos)
	want := map[string]int{"fnVoid": 0, "fnCallback": 3, "fnLoc": 4, "fnTwo": 3, "fnRenamed_v2": 2, "fnUnnamed": 3, "fnOld": 1}
	if len(got) != len(want) {
		t.Errorf("found %v, want %v", got, want)
	}
	for name, n := range want {
		if w, ok := got[name]; !ok || w != n {
			t.Errorf("%s (%s): %d words (found %v), want %d", name, protos[name], w, ok, n)
		}
	}
}

// recorder keeps the errors a check reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// CheckArgs reports a row whose count differs from the header's, per
// vendor, and a symbol the header lacks as absent; a floating-point or
// wide by-value parameter is an error of its own.
func TestCheckArgs(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: ", err)
	}
	inc := t.TempDir()
	h := "typedef struct { char b[24]; } Wide;\nint cuA(int a, int b);\nint hipA(int a, int b, int kind);\nint cuB(void);\nint hipB(double d);\nint hipC(Wide w);\n"
	if err := os.WriteFile(filepath.Join(inc, "t.h"), []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	tab := &symtab.Table{Name: "t", Rows: []symtab.Row{
		{Op: "A", Symbol: [symtab.NumVendors]string{"cuA", "hipA"}, Args: symtab.ArgsPer(2, 2)},
		{ID: 1, Op: "B", Symbol: [symtab.NumVendors]string{"cuB", "hipB"}, Args: symtab.Args(0)},
		{ID: 2, Op: "C", Symbol: [symtab.NumVendors]string{"cuMissing", "hipC"}, Args: symtab.Args(1)},
	}}
	for _, tc := range []struct {
		v       symtab.Vendor
		checked int
		absent  string
		errs    []string
	}{
		{symtab.CUDA, 2, "cuMissing", nil},
		{symtab.HIP, 3, "", []string{"hipA(int a, int b, int kind), 3 words; the row says 2", "floating-point", "24-byte struct"}},
	} {
		r := &recorder{TB: t}
		checked, absent := CheckArgs(r, gcc, inc, "#include <t.h>\n", "t.h", tab, tc.v)
		if checked != tc.checked || strings.Join(absent, " ") != tc.absent {
			t.Errorf("%s: checked %d, absent %v; want %d, %q", tc.v, checked, absent, tc.checked, tc.absent)
		}
		if len(r.errs) < len(tc.errs) || (len(tc.errs) == 0 && len(r.errs) > 0) {
			t.Errorf("%s: errors %q, want %q", tc.v, r.errs, tc.errs)
			continue
		}
		all := strings.Join(r.errs, "\n")
		for _, want := range tc.errs {
			if !strings.Contains(all, want) {
				t.Errorf("%s: errors %q lack %q", tc.v, r.errs, want)
			}
		}
	}
}
