package rtc

import (
	"strings"

	"github.com/gpumem/gpumem/internal/symtab"
)

// DialectRow is one difference between CUDA's and HIP's dialects: the
// macro kernels write (Common) and what it stands for on each vendor.
type DialectRow struct {
	Common string // "GPUMEM_SHFL_DOWN(mask, v, delta)"
	CUDA   string // "__shfl_down_sync(mask, v, delta)"; "" leaves the macro undefined
	HIP    string // "__shfl_down(v, delta)"
	Notes  string
}

// Dialect returns the table of dialect differences Header renders.
func Dialect() []DialectRow {
	out := make([]DialectRow, len(symtab.Dialect))
	for i, r := range symtab.Dialect {
		out[i] = DialectRow{Common: r.Common, CUDA: r.Spelling[symtab.CUDA], HIP: r.Spelling[symtab.HIP], Notes: r.Notes}
	}
	return out
}

// Header renders the dialect table for backend ("cuda" or "hip"; the
// compiler names work too): one #define per row the vendor spells, inside
// an include guard. Compile prepends it to every source unless
// Request.NoDialect is set. An unknown backend gives "".
func Header(backend string) string {
	v, ok := vendorOf(backend)
	if !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString("// " + symtab.DialectHeaderName + ": the common kernel dialect for " + v.String() + ", rendered from gpumem's dialect table.\n")
	b.WriteString("#ifndef GPUMEM_DIALECT_H\n#define GPUMEM_DIALECT_H\n")
	for _, r := range symtab.Dialect {
		if s := r.Spelling[v]; s != "" {
			b.WriteString("#define " + r.Common + " " + s + "\n")
		}
	}
	b.WriteString("#endif\n")
	return b.String()
}
