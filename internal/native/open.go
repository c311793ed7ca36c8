package native

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// OpenBackend is Open for a vendor package's Open: the backend as a
// gpumem.Backend, nil (not a typed nil) when it fails.
func OpenBackend(d *Dialect, load Loader, path string) (gpumem.Backend, error) {
	b, err := Open(d, load, path)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Open loads the library (path, or the dialect's candidates), resolves the
// table and starts the runtime.
func Open(d *Dialect, load Loader, path string) (*Backend, error) {
	b, err := Load(d, load, path)
	if err != nil {
		return nil, err
	}
	var missing []string
	for i := range symtab.Driver.Rows {
		r := &symtab.Driver.Rows[i]
		if r.Required[d.Vendor] && b.fns[i] == 0 {
			missing = append(missing, r.Symbol[d.Vendor])
		}
	}
	if len(missing) > 0 {
		return nil, &gpumem.MissingSymbolsError{Backend: d.Name, Library: b.lib.Path(), Symbols: missing}
	}
	if err := d.Start(b); err != nil {
		return nil, fmt.Errorf("%w (library %s)", err, b.lib.Path())
	}
	if d.Refine != nil {
		d.Refine(b)
	}
	b.locByVal = b.fns[symtab.Advise] != 0 && d.Vendor == symtab.CUDA
	return b, nil
}

// Load opens the library and resolves every row by dlsym, without starting
// the runtime.
func Load(d *Dialect, load Loader, path string) (*Backend, error) {
	cands := d.Candidates
	if path != "" {
		cands = []string{path}
	}
	lib, err := load(cands...)
	if err != nil {
		return nil, fmt.Errorf("gpumem: %s: %w", d.Name, err)
	}
	b := &Backend{d: d, lib: lib}
	for i := range symtab.Driver.Rows {
		b.resolveDL(symtab.Op(i))
		b.how[i] = howOf(&symtab.Driver.Rows[i], d)
	}
	return b, nil
}

func (b *Backend) resolveDL(op symtab.Op) {
	name := symtab.Driver.Rows[op].Symbol[b.d.Vendor]
	if name == "" {
		b.fns[op] = 0
		b.missing[op] = fmt.Errorf("the %s API has no such operation", b.d.Name)
		return
	}
	addr, err := b.lib.Sym(name)
	if err != nil || addr == 0 {
		b.fns[op] = 0
		b.missing[op] = fmt.Errorf("symbol %s not exported by %s", name, b.lib.Path())
		return
	}
	b.fns[op], b.missing[op] = addr, nil
}
