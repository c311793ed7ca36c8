package native

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// paramBook remembers the parameters of each kernel found through
// ModuleFunction, where the driver reports them (cuFuncGetParamInfo, CUDA
// 12.4+): LaunchKernel refuses a parameter array of another length instead
// of letting the driver read arguments that are not there, and FuncParams
// answers from it without asking the driver again. A module's kernels are
// forgotten when it is unloaded, so a handle the driver reuses for another
// kernel is never checked against the old one. Launches read the book with
// one atomic load and no lock: the map is replaced, never changed, by
// ModuleFunction and ModuleUnload.
type paramBook struct {
	params   atomic.Pointer[map[uintptr][]gpumem.ParamInfo] // function -> parameters
	mu       sync.Mutex                                     // writers
	byModule map[uintptr][]uintptr                          // module -> its functions in params
}

// get returns f's parameters, if known; the slice is the book's, not to be
// changed.
func (p *paramBook) get(f uintptr) ([]gpumem.ParamInfo, bool) {
	m := p.params.Load()
	if m == nil {
		return nil, false
	}
	ps, ok := (*m)[f]
	return ps, ok
}

// count returns f's parameter count, if known.
func (p *paramBook) count(f uintptr) (int, bool) {
	ps, ok := p.get(f)
	return len(ps), ok
}

// add records the parameters ps of function f of module mod.
func (p *paramBook) add(mod, f uintptr, ps []gpumem.ParamInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.get(f); ok && slices.Equal(old, ps) {
		return
	}
	next := map[uintptr][]gpumem.ParamInfo{f: ps}
	if m := p.params.Load(); m != nil {
		next = maps.Clone(*m)
		next[f] = ps
	}
	if p.byModule == nil {
		p.byModule = map[uintptr][]uintptr{}
	}
	p.byModule[mod] = append(p.byModule[mod], f)
	p.params.Store(&next)
}

// drop forgets the functions of module mod.
func (p *paramBook) drop(mod uintptr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fs, ok := p.byModule[mod]
	if !ok {
		return
	}
	delete(p.byModule, mod)
	next := maps.Clone(*p.params.Load())
	for _, f := range fs {
		delete(next, f)
	}
	p.params.Store(&next)
}

// learnParams records f's parameters where the driver reports them; a
// driver without the report, or one that fails it, leaves f unchecked.
func (b *Backend) learnParams(mod, f uintptr, dev int, name string) {
	if b.fns[symtab.FuncGetParamInfo] == 0 {
		return
	}
	ps, err := b.funcParams(f, dev, name)
	if err != nil {
		return
	}
	b.params.add(mod, f, ps)
}
