package abitest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/symtab"
)

// Proto is a function's prototype as a header declares it: its parameter
// declarations, in order ("CUdeviceptr *dptr", "size_t bytesize"); none
// for f(void).
type Proto struct {
	Name   string
	Params []string
}

// String formats p as C.
func (p Proto) String() string {
	if len(p.Params) == 0 {
		return p.Name + "(void)"
	}
	return p.Name + "(" + strings.Join(p.Params, ", ") + ")"
}

// Prototypes preprocesses prelude with gcc against the headers in inc and
// returns the prototype of each of names that the preprocessed text
// declares at file scope. Preprocessing applies the headers' own macros,
// so a name the headers #define to another (cuMemAlloc to cuMemAlloc_v2)
// is declared under the name it expands to, and declarations in sections
// the prelude does not enable are not seen. A name declared twice with
// different parameter counts is a test error.
func Prototypes(t testing.TB, gcc, inc, prelude string, names []string) map[string]Proto {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "protos.c")
	if err := os.WriteFile(c, []byte(prelude), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gcc, "-E", "-P", "-I", inc, c).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("preprocessing %q against %s: %v\n%s", prelude, inc, err, msg)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found, conflicts := declarations(out, want)
	for _, c := range conflicts {
		t.Errorf("the headers declare %s and %s", c[0], c[1])
	}
	return found
}

// declarations finds the file-scope declarations of the functions in want
// in preprocessed C: an identifier of want at brace and parenthesis depth 0
// followed by "(". It returns their prototypes and the pairs of
// declarations of one name whose parameter counts differ.
func declarations(src []byte, want map[string]bool) (map[string]Proto, [][2]Proto) {
	toks := tokens(src)
	found := map[string]Proto{}
	var conflicts [][2]Proto
	braces, parens := 0, 0
	for i := 0; i < len(toks); i++ {
		switch tok := toks[i]; tok {
		case "{":
			braces++
		case "}":
			braces--
		case "(":
			parens++
		case ")":
			parens--
		default:
			if braces != 0 || parens != 0 || !want[tok] || i+1 >= len(toks) || toks[i+1] != "(" {
				continue
			}
			p, next := params(toks, i+1)
			p.Name = tok
			if prev, ok := found[tok]; ok && len(prev.Params) != len(p.Params) {
				conflicts = append(conflicts, [2]Proto{prev, p})
			}
			found[tok] = p
			i = next - 1
		}
	}
	return found, conflicts
}

// params reads the parameter list opening at toks[open] ("("): the
// declarations between the top-level commas. It returns them and the index
// after the closing ")".
func params(toks []string, open int) (Proto, int) {
	var p Proto
	var cur []string
	depth := 0
	i := open
	for ; i < len(toks); i++ {
		switch tok := toks[i]; tok {
		case "(", "[":
			depth++
			if depth == 1 {
				continue
			}
		case ")", "]":
			depth--
			if depth == 0 {
				if len(cur) > 0 {
					p.Params = append(p.Params, strings.Join(cur, " "))
				}
				if len(p.Params) == 1 && p.Params[0] == "void" {
					p.Params = nil
				}
				return p, i + 1
			}
		case ",":
			if depth == 1 {
				p.Params = append(p.Params, strings.Join(cur, " "))
				cur = nil
				continue
			}
		}
		cur = append(cur, toks[i])
	}
	return p, i
}

// tokens splits preprocessed C into identifiers, numbers, string and
// character literals and single punctuation characters, skipping white
// space and the lines the preprocessor leaves starting with "#"
// (#pragma).
func tokens(src []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for i := 0; i < len(line); {
			c := line[i]
			switch {
			case c == ' ' || c == '\t' || c == '\r':
				i++
			case isIdent(c):
				j := i
				for j < len(line) && isIdent(line[j]) {
					j++
				}
				out = append(out, line[i:j])
				i = j
			case c == '"' || c == '\'':
				j := i + 1
				for j < len(line) && line[j] != c {
					if line[j] == '\\' {
						j++
					}
					j++
				}
				out = append(out, line[i:min(j+1, len(line))])
				i = j + 1
			default:
				out = append(out, line[i:i+1])
				i++
			}
		}
	}
	return out
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// paramType is the type of a parameter declaration: the declaration
// without its name ("unsigned int flags" is "unsigned int", "CUdevice" is
// itself).
func paramType(decl string) string {
	f := strings.Fields(decl)
	if len(f) < 2 || typeWords[f[len(f)-1]] {
		return decl
	}
	for _, w := range f[:len(f)-1] {
		if !qualifiers[w] {
			return strings.Join(f[:len(f)-1], " ")
		}
	}
	return decl // "const CUdevice", "struct S": no name
}

var typeWords = map[string]bool{"void": true, "char": true, "short": true, "int": true, "long": true,
	"float": true, "double": true, "signed": true, "unsigned": true, "_Bool": true}

var qualifiers = map[string]bool{"const": true, "volatile": true, "restrict": true, "__restrict": true,
	"struct": true, "union": true, "enum": true}

// byValue reports whether a parameter is passed by value rather than as
// a pointer (an array parameter is a pointer too).
func byValue(decl string) bool { return !strings.ContainsAny(decl, "*[") }

// Words returns the argument words of each prototype, as the binding
// package passes them: a pointer is one; a by-value parameter is one word
// up to 8 bytes and two up to 16, by its size as gcc lays it out against
// the same headers. A floating-point parameter or a by-value struct over
// 16 bytes (which amd64 copies onto the stack and arm64 passes by
// reference) has no word count that holds on both, and is a test error.
func Words(t testing.TB, gcc, inc, prelude string, protos map[string]Proto) map[string]int {
	t.Helper()
	type param struct{ fn, typ string }
	var vals []param
	idx := map[string]int{}
	for _, name := range sortedNames(protos) {
		for _, d := range protos[name].Params {
			if byValue(d) {
				typ := paramType(d)
				if _, ok := idx[typ]; !ok {
					idx[typ] = len(vals)
					vals = append(vals, param{name, typ})
				}
			}
		}
	}
	sizes := make([][2]int, len(vals)) // size, floating
	if len(vals) > 0 {
		var b strings.Builder
		b.WriteString(prelude)
		b.WriteString("\n#include <stdio.h>\nint main(void) {\n")
		for _, v := range vals {
			fmt.Fprintf(&b, "\tprintf(\"%%zu %%d\\n\", sizeof(%s), _Generic((%s){0}, float: 1, double: 1, long double: 1, default: 0));\n", v.typ, v.typ)
		}
		b.WriteString("\treturn 0;\n}\n")
		out := run(t, gcc, inc, b.String())
		lines := strings.Fields(out)
		if len(lines) != 2*len(vals) {
			t.Fatalf("the parameter sizes program printed %q for %d types", out, len(vals))
		}
		for i := range vals {
			fmt.Sscan(lines[2*i], &sizes[i][0])
			fmt.Sscan(lines[2*i+1], &sizes[i][1])
		}
	}
	words := map[string]int{}
	for name, p := range protos {
		n := 0
		for _, d := range p.Params {
			if !byValue(d) {
				n++
				continue
			}
			sz := sizes[idx[paramType(d)]]
			switch {
			case sz[1] != 0:
				t.Errorf("%s: parameter %q is floating-point: not passed in integer words", p, d)
			case sz[0] > 16:
				t.Errorf("%s: parameter %q is a %d-byte struct by value: amd64 and arm64 pass it differently", p, d, sz[0])
			case sz[0] > 8:
				n += 2
			default:
				n++
			}
		}
		words[name] = n
	}
	return words
}

// run compiles src with gcc against inc and returns what the program
// printed.
func run(t testing.TB, gcc, inc, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "words.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "words")
	if out, err := exec.Command(gcc, "-I", inc, "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("compiling the parameter sizes against %s: %v\n%s", inc, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// CheckArgs compares the Args of every row of tab with a vendor v symbol
// against the prototype the headers (prelude, compiled against inc, named
// header in messages) declare for that symbol, and reports every
// difference as a test error. It returns how many rows it checked and the
// symbols the headers do not declare (functions newer than the headers,
// or names the headers #define to another ABI's symbol).
func CheckArgs(t testing.TB, gcc, inc, prelude, header string, tab *symtab.Table, v symtab.Vendor) (checked int, absent []string) {
	t.Helper()
	var names []string
	for _, r := range tab.Column(v) {
		names = append(names, r.Symbol[v])
	}
	protos := Prototypes(t, gcc, inc, prelude, names)
	words := Words(t, gcc, inc, prelude, protos)
	for _, r := range tab.Column(v) {
		sym := r.Symbol[v]
		p, ok := protos[sym]
		if !ok {
			absent = append(absent, sym)
			continue
		}
		checked++
		n, declared := r.Args.Words(v)
		switch {
		case !declared:
			t.Errorf("%s: %s: %s declares %s (%d words); the row declares no argument count", tab.Name, r.Op, header, p, words[sym])
		case n != words[sym]:
			t.Errorf("%s: %s: %s declares %s, %d words; the row says %d", tab.Name, r.Op, header, p, words[sym], n)
		}
	}
	return checked, absent
}

// CheckTable is CheckArgs that also requires the headers to declare at
// least three quarters of the column's symbols (the rest: functions newer
// than the headers, or names they #define to a newer ABI's symbol), and
// logs what it checked and what the headers lack.
func CheckTable(t testing.TB, gcc, inc, prelude, header string, tab *symtab.Table, v symtab.Vendor) {
	t.Helper()
	checked, absent := CheckArgs(t, gcc, inc, prelude, header, tab, v)
	total := checked + len(absent)
	t.Logf("%s: the %s table's argument words: %d of %d %s symbols checked; not declared there: %s",
		header, tab.Name, checked, total, v, strings.Join(absent, " "))
	if 4*checked < 3*total {
		t.Errorf("%s declares only %d of the %s table's %d %s symbols: is it the right header?", header, checked, tab.Name, total, v)
	}
}
