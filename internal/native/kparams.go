package native

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem/internal/symtab"
)

// paramBook remembers how many parameters each kernel found through
// ModuleFunction takes, where the driver reports it (cuFuncGetParamInfo,
// CUDA 12.4+), so that LaunchKernel refuses a parameter array of another
// length instead of letting the driver read arguments that are not there.
// The counts of a module's kernels are forgotten when it is unloaded, so a
// handle the driver reuses for another kernel is never checked against the
// old one. Launches read the counts with one atomic load and no lock: the
// map is replaced, never changed, by ModuleFunction and ModuleUnload.
type paramBook struct {
	counts   atomic.Pointer[map[uintptr]int] // function -> parameters
	mu       sync.Mutex                      // writers
	byModule map[uintptr][]uintptr           // module -> its functions in counts
}

// count returns f's parameter count, if known.
func (p *paramBook) count(f uintptr) (int, bool) {
	m := p.counts.Load()
	if m == nil {
		return 0, false
	}
	n, ok := (*m)[f]
	return n, ok
}

// add records that function f of module mod takes n parameters.
func (p *paramBook) add(mod, f uintptr, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.count(f); ok && old == n {
		return
	}
	next := map[uintptr]int{f: n}
	if m := p.counts.Load(); m != nil {
		next = maps.Clone(*m)
		next[f] = n
	}
	if p.byModule == nil {
		p.byModule = map[uintptr][]uintptr{}
	}
	p.byModule[mod] = append(p.byModule[mod], f)
	p.counts.Store(&next)
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
	next := maps.Clone(*p.counts.Load())
	for _, f := range fs {
		delete(next, f)
	}
	p.counts.Store(&next)
}

// learnParams records f's parameter count where the driver reports it; a
// driver without the report, or one that fails it, leaves f unchecked.
func (b *Backend) learnParams(mod, f uintptr, dev int, name string) {
	if b.fns[symtab.FuncGetParamInfo] == 0 {
		return
	}
	ps, err := b.funcParams(f, dev, name)
	if err != nil {
		return
	}
	b.params.add(mod, f, len(ps))
}
