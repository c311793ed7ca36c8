package rtc

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Symbols resolves the compiler table of backend ("cuda"/"nvrtc" or
// "hip"/"hiprtc") against library ("" for the environment variable, then
// the candidates) and reports every row, without compiling anything. The
// report's Backend is the backend, its Version the compiler's ("11.8").
// A library that loads but lacks required symbols is reported (with
// MissingRequired > 0), not refused; no loadable library is an error
// matching gpumem.ErrLibraryNotFound.
func Symbols(backend, library string, opts ...Option) (gpumem.SymbolReport, error) {
	v, ok := vendorOf(backend)
	if !ok {
		return gpumem.SymbolReport{}, fmt.Errorf("rtc: no run-time compiler for backend %q (want cuda or hip): %w", backend, gpumem.ErrInvalidValue)
	}
	rep := gpumem.SymbolReport{Backend: v.String(), Library: library, Rows: []gpumem.SymbolRow{}}
	cfg := config{load: DL}
	for _, o := range opts {
		o(&cfg)
	}
	lib, err := loadLibrary(v, library, cfg.load, func(Library) string { return "" })
	if err != nil {
		return rep, err
	}
	c := &Compiler{vendor: v, lib: lib}
	defer lib.Close()
	c.resolve(lib)
	rep.Library = lib.Path()
	if c.fns[symtab.RTCVersion] != 0 {
		if major, minor, err := c.version(); err == nil {
			rep.Version = fmt.Sprintf("%d.%d", major, minor)
		}
	}
	for _, r := range symtab.RTC.Column(v) {
		row := gpumem.SymbolRow{Name: r.Op, Symbol: r.Symbol[v], Resolved: c.fns[r.ID] != 0, Required: r.Required[v], Args: r.Args.Ref(v), Notes: r.Notes}
		if row.Required && !row.Resolved {
			rep.MissingRequired++
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}
