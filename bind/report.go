package bind

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/gpumem/gpumem"
)

// Resolve loads lib for vendor v and resolves its table without failing on
// missing symbols and without calling anything but the version query (so it
// works on machines with no GPU), for the symbols command: one row per
// function the vendor has, as the driver's table is reported.
func Resolve(lib *Library, v Vendor, opts ...Option) (gpumem.SymbolReport, error) {
	rep := gpumem.SymbolReport{Backend: v.String()}
	if lib != nil {
		rep.Backend = lib.Name
	}
	l, err := load(lib, v, collect(opts))
	if err != nil {
		return rep, err
	}
	defer l.Close()
	rep.Library = l.Path()
	if lib.Version != nil {
		if ver, err := lib.Version(l); err == nil {
			rep.Version = ver
		}
	}
	for i, r := range lib.Table.Rows {
		if r.Symbol[v] == "" {
			continue
		}
		row := gpumem.SymbolRow{Name: r.Op, Symbol: r.Symbol[v], Resolved: l.fns[i] != 0, Required: r.Required[v], Args: r.Args.Ref(v), Notes: r.Notes}
		if row.Required && !row.Resolved {
			rep.MissingRequired++
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// A Binding is a named family of library declarations (BLAS: cuBLAS on
// CUDA; hipBLAS, else rocBLAS, on HIP) that the symbols command checks
// with --table NAME.
type Binding struct {
	// Name is the table's name on the command line ("blas").
	Name string
	// Libraries are each vendor's declarations, in the order they are
	// tried.
	Libraries [NumVendors][]*Library
}

var registry struct {
	mu sync.Mutex
	m  map[string]Binding
}

// Register makes a binding known to the symbols command. Registering a
// name again replaces it.
func Register(b Binding) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.m == nil {
		registry.m = map[string]Binding{}
	}
	registry.m[b.Name] = b
}

// Bindings returns the registered bindings' names, sorted.
func Bindings() []string {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the binding registered as name.
func Lookup(name string) (Binding, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	b, ok := registry.m[name]
	return b, ok
}

// Resolve resolves the binding's declarations for vendor v in order and
// returns the report of the first whose file loads and that lacks no
// required symbol, else the first that loaded, else the load errors of
// them all.
func (b Binding) Resolve(v Vendor, opts ...Option) (gpumem.SymbolReport, error) {
	if v < 0 || v >= NumVendors || len(b.Libraries[v]) == 0 {
		return gpumem.SymbolReport{Backend: b.Name}, fmt.Errorf("gpumem: bind: %s has no library for %s: %w", b.Name, v, gpumem.ErrNotSupported)
	}
	var first *gpumem.SymbolReport
	var errs []error
	for _, lib := range b.Libraries[v] {
		rep, err := Resolve(lib, v, opts...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if rep.MissingRequired == 0 {
			return rep, nil
		}
		if first == nil {
			first = &rep
		}
	}
	if first != nil {
		return *first, nil
	}
	return gpumem.SymbolReport{Backend: b.Name}, errors.Join(errs...)
}
