// Package abitest holds the test code both vendor packages use to check their
// ABI tables: compiling symtab.ABIProgram against a vendor's headers and
// comparing what the compiler says, and checking a `gpumem symbols` report.
package abitest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// ABIFunc is a vendor package's ABI: the layouts and constants the backend
// uses at library version v.
type ABIFunc func(v int) (map[string]gpumem.StructLayout, map[string]int64)

// Dump is the C program's output, in SymbolReport's shape.
type Dump struct {
	Layouts   map[string]gpumem.StructLayout `json:"layouts"`
	Constants map[string]int64               `json:"constants"`
}

// Compile builds symtab.ABIProgram(prelude, layouts, consts) with gcc against
// the headers in inc, runs it and returns what it printed. When
// GPUMEM_TEST_ABI_DUMP names a file, the output is written there too.
func Compile(t testing.TB, gcc, inc, prelude string, layouts map[string]gpumem.StructLayout, consts map[string]int64) Dump {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "abi.c")
	if err := os.WriteFile(c, []byte(symtab.ABIProgram(prelude, layouts, consts)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "abi")
	if out, err := exec.Command(gcc, "-I", inc, "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("compiling the ABI dump against %s: %v\n%s", inc, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("GPUMEM_TEST_ABI_DUMP"); d != "" {
		_ = os.WriteFile(d, out, 0o644)
	}
	var got Dump
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("reading the ABI dump: %v\n%s", err, out)
	}
	return got
}

// Compare reports, as test errors, every layout and constant in which got
// (what the compiler said of the headers, named by header) differs from what
// the backend uses, and returns how many differ.
func Compare(t testing.TB, header string, got Dump, layouts map[string]gpumem.StructLayout, consts map[string]int64) int {
	t.Helper()
	bad := 0
	for _, name := range sortedNames(layouts) {
		l := layouts[name]
		if g := got.Layouts[name]; !reflect.DeepEqual(g, l) {
			t.Errorf("%s: %s says %+v, backend uses %+v", name, header, g, l)
			bad++
			continue
		}
		t.Logf("%s: size %d, %d fields %v", name, l.Size, len(l.Offsets), l.Offsets)
	}
	for _, name := range sortedNames(consts) {
		if g, ok := got.Constants[name]; !ok || g != consts[name] {
			t.Errorf("%s: %s says %d, backend uses %d", name, header, g, consts[name])
			bad++
		}
	}
	return bad
}

// ReadReport reads a `gpumem symbols --json` report from the file path.
func ReadReport(t testing.TB, path string) gpumem.SymbolReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep gpumem.SymbolReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// CheckReport checks that rep, a report for library version v, resolved
// every required symbol and reports abi(v)'s layouts and constants.
func CheckReport(t testing.TB, rep gpumem.SymbolReport, v int, abi ABIFunc) {
	t.Helper()
	if rep.MissingRequired != 0 {
		t.Errorf("%s: %d required symbols missing", rep.Library, rep.MissingRequired)
	}
	layouts, consts := abi(v)
	if len(layouts) == 0 || len(consts) == 0 {
		t.Errorf("ABI(%d) is empty", v)
	}
	if !reflect.DeepEqual(rep.Layouts, layouts) {
		t.Errorf("%s (%s): the report's layouts are not ABI(%d)'s:\n%v\n%v", rep.Library, rep.Version, v, rep.Layouts, layouts)
	}
	if !reflect.DeepEqual(rep.Constants, consts) {
		t.Errorf("%s (%s): the report's constants are not ABI(%d)'s:\n%v\n%v", rep.Library, rep.Version, v, rep.Constants, consts)
	}
	t.Logf("%s: %s (%d): %d layouts and %d constants as ABI(%d) gives", rep.Library, rep.Version, v, len(layouts), len(consts), v)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
