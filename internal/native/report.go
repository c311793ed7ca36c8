package native

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Table returns the vendor's rows of the symbol table, unresolved (for docs
// and the symbols command).
func Table(v symtab.Vendor) []gpumem.SymbolRow {
	var out []gpumem.SymbolRow
	for _, r := range symtab.Driver.Column(v) {
		out = append(out, gpumem.SymbolRow{Name: r.Op, Symbol: r.Symbol[v], Required: r.Required[v], Args: r.Args.Ref(v), Notes: r.Notes})
	}
	return out
}

// Report resolves the table against a library without starting the runtime
// (so it works on machines with no GPU). prepare, if not nil, may refine the
// resolution and returns the version string to report.
func Report(d *Dialect, load Loader, library string, prepare func(b *Backend) string) (gpumem.SymbolReport, error) {
	rep := gpumem.SymbolReport{Backend: d.Name, Library: library}
	b, err := Load(d, load, library)
	if err != nil {
		return rep, err
	}
	rep.Library = b.lib.Path()
	if prepare != nil {
		rep.Version = prepare(b)
	}
	for _, r := range symtab.Driver.Column(d.Vendor) {
		row := gpumem.SymbolRow{Name: r.Op, Symbol: r.Symbol[d.Vendor], Resolved: b.fns[r.ID] != 0, Required: r.Required[d.Vendor], Args: r.Args.Ref(d.Vendor), Notes: r.Notes}
		if row.Required && !row.Resolved {
			rep.MissingRequired++
		}
		rep.Rows = append(rep.Rows, row)
	}
	if d.ABI != nil {
		rep.Layouts, rep.Constants = d.ABI(b)
	}
	return rep, nil
}

// LibraryErrorName loads the library (without starting the runtime) and asks
// it for the name of code.
func LibraryErrorName(d *Dialect, load Loader, library string, code int) (string, error) {
	b, err := Load(d, load, library)
	if err != nil {
		return "", err
	}
	if b.Fn(symtab.GetErrorName) == 0 {
		return "", b.notSupported(symtab.GetErrorName)
	}
	return d.ErrorName(b, code), nil
}
