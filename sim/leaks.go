package sim

import (
	"fmt"
	"sort"
)

// Leaks describes every object still alive: allocations (device, pinned
// host, managed, stream-ordered, graph allocations launched and not freed),
// streams, events, created pools, graphs, executable graphs, user objects,
// physical allocations, mappings, reservations, tags and captures in
// progress, each with the stack that created it. It is empty when nothing
// leaked; a test calls it after releasing everything it made.
func (g *GPU) Leaks() []string {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []string{} // empty, not nil, when nothing leaked
	add := func(what string, st *stack) {
		out = append(out, fmt.Sprintf("%s, created at:\n%s", what, st.String()))
	}
	for _, o := range g.allocs {
		if o.kind == objGraphAlloc && !o.owned {
			continue
		}
		add(o.describe(), &o.stack)
	}
	g.spans.each(func(o *object) bool {
		if o.kind == objMapping {
			add(o.describe(), &o.stack)
		}
		return true
	})
	g.reserves.each(func(o *object) bool {
		add(o.describe(), &o.stack)
		return true
	})
	g.tags.each(func(o *object) bool {
		add(o.describe(), &o.stack)
		return true
	})
	for _, s := range g.streams {
		add(fmt.Sprintf("stream %v", s.handle()), &s.stack)
	}
	for _, e := range g.events {
		add(fmt.Sprintf("event(dev %d, %#x)", e.dev.ord, e.h), &e.stack)
	}
	for _, p := range g.pools {
		if !p.isDefault {
			add(fmt.Sprintf("memory pool(dev %d, %#x) reserving %d bytes", p.dev.ord, p.h, p.reserved), &p.stack)
		}
	}
	for _, gr := range g.graphs {
		add(fmt.Sprintf("graph(dev %d, %#x) of %d nodes", gr.dev.ord, gr.h, len(gr.nodes)), &gr.stack)
	}
	for _, ge := range g.execs {
		add(fmt.Sprintf("executable graph(dev %d, %#x)", ge.gr.dev.ord, ge.h), &ge.stack)
	}
	for _, uo := range g.uobjs {
		add(fmt.Sprintf("user object(dev %d, %#x) with %d references", uo.dev, uo.h, uo.refs), &uo.stack)
	}
	for _, h := range g.handles {
		add(fmt.Sprintf("physical allocation(dev %d, %#x) of %d bytes", h.dev.ord, h.id, h.size), &h.stack)
	}
	g.moduleLeaks(add)
	for _, c := range g.captures {
		add(fmt.Sprintf("capture %d on %v, never ended", c.id, c.origin.handle()), &c.graph.stack)
	}
	sort.Strings(out)
	return out
}
