// ABI data: the structs the backends lay out by hand and the enum and flag
// values they pass or interpret, each with the first library version that has
// it in that form. The vendor packages (driver/, hip/) keep their tables in
// this form, write structs from them, report them in `gpumem symbols --json`,
// and tests compile them into a C program against each version's headers.

package symtab

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpumem/gpumem"
)

// Field is one field of a struct: its name as the vendor's header spells it
// (a nested field as "location.id") and its byte offset.
type Field struct {
	Name   string
	Offset int
}

// Layout is one form of a vendor struct, valid from library version From
// (in the vendor's numbering; 0: every version) until the next form's From.
type Layout struct {
	Struct string // the vendor's typedef name, e.g. "hipMemAllocationProp"
	From   int
	Size   int
	Fields []Field
}

// Offset returns the offset of the named field; it panics on a name the
// table lacks (a programming error caught by tests).
func (l *Layout) Offset(name string) int {
	for _, f := range l.Fields {
		if f.Name == name {
			return f.Offset
		}
	}
	panic("symtab: " + l.Struct + " has no field " + name)
}

// Const is a vendor enum or flag value, present from library version From
// (0: every version the project supports) up to, not including, Until (0: no
// end).
type Const struct {
	Name  string // the vendor's identifier
	Value int64
	From  int
	Until int
}

// In reports whether the constant exists in version v.
func (c Const) In(v int) bool { return v >= c.From && (c.Until == 0 || v < c.Until) }

// Mapping is one entry of a vendor's translation table: the project's value
// Key and the vendor constant it becomes.
type Mapping[K comparable] struct {
	Key K
	Const
}

// find returns the entry t has for k, or nil.
func find[K comparable](t []Mapping[K], k K) *Mapping[K] {
	for i := range t {
		if t[i].Key == k {
			return &t[i]
		}
	}
	return nil
}

// Translate returns the vendor value t maps k to, whatever the library
// version; false if t has no entry for k.
func Translate[K comparable](t []Mapping[K], k K) (int32, bool) {
	if m := find(t, k); m != nil {
		return int32(m.Value), true
	}
	return 0, false
}

// TranslateAt is Translate at library version v: an entry the version lacks
// (see Const.In) has no translation.
func TranslateAt[K comparable](t []Mapping[K], v int, k K) (int32, bool) {
	if m := find(t, k); m != nil {
		return int32(m.Value), m.In(v)
	}
	return 0, false
}

// Consts returns the vendor constants of t's entries.
func Consts[K comparable](t []Mapping[K]) []Const {
	out := make([]Const, len(t))
	for i := range t {
		out[i] = t[i].Const
	}
	return out
}

// Constants returns every vendor value a backend passes or interprets: the
// groups of constants given, then the vendor's statuses.
func Constants(vendor Vendor, groups ...[]Const) []Const {
	var out []Const
	for _, g := range groups {
		out = append(out, g...)
	}
	for _, s := range Statuses[vendor].Statuses {
		out = append(out, Const{Name: s.Name, Value: int64(s.Code)})
	}
	return out
}

// SelectLayouts returns, for each struct name, the form valid at version v (forms
// of one struct ordered by From).
func SelectLayouts(layouts []Layout, v int) map[string]*Layout {
	out := map[string]*Layout{}
	for i := range layouts {
		l := &layouts[i]
		if l.From <= v {
			if cur, ok := out[l.Struct]; !ok || cur.From <= l.From {
				out[l.Struct] = l
			}
		}
	}
	return out
}

// ABIReport turns the forms valid at version v and the constants present in it
// into SymbolReport's fields.
func ABIReport(layouts []Layout, consts []Const, v int) (map[string]gpumem.StructLayout, map[string]int64) {
	ls := map[string]gpumem.StructLayout{}
	for name, l := range SelectLayouts(layouts, v) {
		offs := make(map[string]int, len(l.Fields))
		for _, f := range l.Fields {
			offs[f.Name] = f.Offset
		}
		ls[name] = gpumem.StructLayout{Size: l.Size, Offsets: offs}
	}
	cs := map[string]int64{}
	for _, c := range consts {
		if c.In(v) {
			cs[c.Name] = c.Value
		}
	}
	return ls, cs
}

// ABIProgram returns a C program that prints, as one JSON object
// {"layouts": {...}, "constants": {...}} in SymbolReport's shape, what the
// compiler says of every struct and constant named in layouts and consts:
// sizeof, offsetof (under the same field names) and each value. prelude
// holds the #defines and #includes of the vendor's headers.
func ABIProgram(prelude string, layouts map[string]gpumem.StructLayout, consts map[string]int64) string {
	var b strings.Builder
	b.WriteString(prelude)
	b.WriteString("\n#include <stdio.h>\n#include <stddef.h>\nint main(void) {\n  printf(\"{\\\"layouts\\\": {\");\n")
	sep := ""
	for _, name := range sortedKeys(layouts) {
		l := layouts[name]
		fmt.Fprintf(&b, "  printf(\"%s\\\"%s\\\": {\\\"size\\\": %%zu, \\\"offsets\\\": {\", sizeof(%s));\n", sep, name, name)
		fsep := ""
		for _, f := range sortedKeys(l.Offsets) {
			fmt.Fprintf(&b, "  printf(\"%s\\\"%s\\\": %%zu\", offsetof(%s, %s));\n", fsep, f, name, f)
			fsep = ", "
		}
		b.WriteString("  printf(\"}}\");\n")
		sep = ", "
	}
	b.WriteString("  printf(\"}, \\\"constants\\\": {\");\n")
	sep = ""
	for _, name := range sortedKeys(consts) {
		fmt.Fprintf(&b, "  printf(\"%s\\\"%s\\\": %%lld\", (long long)(%s));\n", sep, name, name)
		sep = ", "
	}
	b.WriteString("  printf(\"}}\\n\");\n  return 0;\n}\n")
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
