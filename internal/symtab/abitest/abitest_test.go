package abitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem"
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
