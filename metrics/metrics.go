package metrics

import (
	"bufio"
	"bytes"
	"expvar"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/nilcheck"
)

// Source is anything that reports per-device statistics: every allocator of
// the project (caching, asyncpool, managed) and every adaptor is one.
type Source interface {
	Stats(dev int) gpumem.MemoryStats
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(dev int) gpumem.MemoryStats

// Stats calls f(dev).
func (f SourceFunc) Stats(dev int) gpumem.MemoryStats { return f(dev) }

// ContentType is the media type of the Prometheus text exposition format that
// WritePrometheus writes and Handler serves.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

type entry struct {
	name string
	c    Collector
}

// Registry is a set of named sources, each watched on a list of devices. The
// zero value is an empty registry ready for use; it is safe for concurrent
// use, and its output may be read while the sources allocate.
type Registry struct {
	mu      sync.Mutex
	entries []entry // sorted by name
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Add watches src under name (the allocator label, such as "caching") on the
// given devices, with the families of AllocatorCollector. An empty name, a nil
// source, no devices, a negative device or a name already added returns an
// error matching gpumem.ErrInvalidValue.
func (r *Registry) Add(name string, src Source, devices []int) error {
	c, err := AllocatorCollector(src, devices)
	if err != nil {
		return fmt.Errorf("metrics: add %q: %w", name, err)
	}
	return r.AddCollector(name, c)
}

// AddCollector watches c under name (the allocator label of its samples).
// The name shares one space with Add's. An empty name, a nil collector, a
// name already added, a family whose name or type the exposition format
// cannot carry, or a family named as one of the allocators' families or of
// another collector's with another type (one family has one # TYPE) returns
// an error matching gpumem.ErrInvalidValue.
func (r *Registry) AddCollector(name string, c Collector) error {
	if name == "" {
		return fmt.Errorf("metrics: add: empty name: %w", gpumem.ErrInvalidValue)
	}
	if nilcheck.Is(c) {
		return fmt.Errorf("metrics: add %q: nil collector: %w", name, gpumem.ErrInvalidValue)
	}
	if err := checkFamilies(c.Families()); err != nil {
		return fmt.Errorf("metrics: add %q: %w", name, err)
	}
	return r.add(entry{name: name, c: c})
}

// add inserts e, keeping the entries sorted by name.
func (r *Registry) add(e entry) error {
	name := e.name
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.entries), func(i int) bool { return r.entries[i].name >= name })
	if i < len(r.entries) && r.entries[i].name == name {
		return fmt.Errorf("metrics: add %q: name already added: %w", name, gpumem.ErrInvalidValue)
	}
	if err := r.checkTypesLocked(e.c.Families()); err != nil {
		return fmt.Errorf("metrics: add %q: %w", name, err)
	}
	r.entries = append(r.entries, entry{})
	copy(r.entries[i+1:], r.entries[i:])
	r.entries[i] = e
	return nil
}

// checkTypesLocked reports the first family of fs named as a family of the
// allocators or of a collector already added, with another type. r.mu must
// be held.
func (r *Registry) checkTypesLocked(fs []Family) error {
	conflict := func(f Family, others []Family) error {
		for _, o := range others {
			if o.Name == f.Name && o.Type != f.Type {
				return fmt.Errorf("family %s: type %s, where another source's is %s: %w", f.Name, f.Type, o.Type, gpumem.ErrInvalidValue)
			}
		}
		return nil
	}
	for _, f := range fs {
		if err := conflict(f, allocatorFamilies); err != nil {
			return err
		}
		for _, e := range r.entries {
			if err := conflict(f, e.c.Families()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove stops watching the source added under name and reports whether there
// was one.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.entries {
		if e.name == name {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			return true
		}
	}
	return false
}

// snapshot returns the entries, read under the lock; the collectors are
// then called without it.
func (r *Registry) snapshot() []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]entry(nil), r.entries...)
}

// publishMu serializes Publish calls so that the check for a taken name and
// the publication happen together.
var publishMu sync.Mutex

// Publish makes the registry's statistics visible through expvar (and so at
// /debug/vars) under expvarName, as a JSON object
// {allocator: {device: gpumem.MemoryStats}} (a deferrable manager's value is
// its deferrable.Stats instead), read afresh each time. A name
// that is empty or already published by anyone returns an error matching
// gpumem.ErrInvalidValue; Publish never panics.
func (r *Registry) Publish(expvarName string) (err error) {
	if expvarName == "" {
		return fmt.Errorf("metrics: publish: empty name: %w", gpumem.ErrInvalidValue)
	}
	publishMu.Lock()
	defer publishMu.Unlock()
	if expvar.Get(expvarName) != nil {
		return fmt.Errorf("metrics: publish %q: name already published: %w", expvarName, gpumem.ErrInvalidValue)
	}
	defer func() {
		// expvar.Publish panics on a duplicate; a publication made between
		// the check and here by code not using this package ends up here.
		if v := recover(); v != nil {
			err = fmt.Errorf("metrics: publish %q: %v: %w", expvarName, v, gpumem.ErrInvalidValue)
		}
	}()
	expvar.Publish(expvarName, expvar.Func(r.expvarValue))
	return nil
}

// expvarValue is the value published by Publish: each collector's
// ExpvarValue under its name.
func (r *Registry) expvarValue() any {
	out := make(map[string]any)
	for _, e := range r.snapshot() {
		out[e.name] = e.c.ExpvarValue()
	}
	return out
}

// Names returns the names of the families of AllocatorCollector (those of
// every allocator added with Add), in the order WritePrometheus writes them.
func Names() []string {
	out := make([]string, len(allocatorFamilies))
	for i, f := range allocatorFamilies {
		out[i] = f.Name
	}
	return out
}

// WritePrometheus writes every collector's samples in the Prometheus text
// exposition format (version 0.0.4): for each family, one # HELP and one
// # TYPE line and then its samples, each labelled allocator (the name given
// to Add or AddCollector) before the collector's own labels. The families of
// AllocatorCollector are always written, in the order of Names, then the
// other collectors' families in the order they first appear (collectors
// sorted by name). Each collector is read once per call, so all families
// show the same moment of each source. The first write error is returned;
// a sample whose label names the format cannot carry (a bad name, a name
// twice, a collector's own "allocator") is an error matching
// gpumem.ErrInvalidValue, returned before anything is written.
func (r *Registry) WritePrometheus(w io.Writer) error {
	mfs := r.Gather()
	if err := checkSamples(mfs); err != nil { // before a byte is written: no half exposition
		return fmt.Errorf("metrics: write: %w", err)
	}
	bw := bufio.NewWriter(w)
	var line []byte
	for _, mf := range mfs {
		line = append(line[:0], "# HELP "...)
		line = append(line, mf.Name...)
		line = append(line, ' ')
		line = appendEscaped(line, mf.Help, false)
		line = append(line, "\n# TYPE "...)
		line = append(line, mf.Name...)
		line = append(line, ' ')
		line = append(line, mf.Type...)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("metrics: write: %w", err)
		}
		for _, s := range mf.Samples {
			line = append(line[:0], mf.Name...)
			line = append(line, '{')
			for i, l := range s.Labels {
				if i > 0 {
					line = append(line, ',')
				}
				line = append(line, l.Name...)
				line = append(line, `="`...)
				line = appendEscaped(line, l.Value, true)
				line = append(line, '"')
			}
			line = append(line, "} "...)
			line = appendValue(line, s.Value)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return fmt.Errorf("metrics: write: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("metrics: write: %w", err)
	}
	return nil
}

// appendEscaped escapes a label value (backslash, double quote, newline) or
// a HELP text (backslash, newline).
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// Handler returns an http.Handler that serves WritePrometheus's output to GET
// and HEAD requests with Content-Type ContentType, for a Prometheus server
// to scrape.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var buf bytes.Buffer
		if err := r.WritePrometheus(&buf); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(buf.Bytes())
	})
}
