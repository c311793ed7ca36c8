// Package torchsnapshot reads the memory snapshots that PyTorch writes with
// torch.cuda.memory._dump_snapshot and turns a device's recorded history
// into a gpumem trace, so that a PyTorch program's own allocation sequence
// can be replayed through every gpumem allocator. The other way, Write,
// WriteFile and WriteAllocator write a gpumem allocator's snapshot and
// history in the same layout, for PyTorch's viewer (pytorch.org/memory_viz)
// to draw.
//
// Record a snapshot in the PyTorch program:
//
//	torch.cuda.memory._record_memory_history(max_entries=1_000_000)
//	... the work to study ...
//	torch.cuda.memory._dump_snapshot("run.pickle")
//
// # What is read
//
// A snapshot is a Python pickle of plain data, plain or gzip-compressed. It
// is decoded by a reader that accepts dicts, lists, tuples, strings, bytes,
// numbers, booleans and None only: a pickle that would import a module or
// build an object is refused, never executed. Of the top-level dict, Read
// keeps device_traces (each device's history: action, addr, size, stream
// per entry; time_us, frames and the rest are ignored), the number of
// segments, and allocator_settings as text. Input is capped at MaxSize
// bytes after decompression, and the memory its values take by the pickle
// reader's budget (24 bytes a byte of input plus 256 MiB, 8 GiB in all).
//
// # Conversion rules
//
//   - device_traces[d] lists the allocator's actions on device d, oldest
//     first. An "alloc" entry becomes an allocation of its size (the size
//     the program asked for, before PyTorch's rounding) on its stream; a
//     "free_requested" entry becomes the free of the live allocation at its
//     address. Addresses are reused once freed, so allocations are matched
//     to frees by address among the live ones.
//   - The other actions (free_completed, segment_alloc, segment_free,
//     segment_map, segment_unmap, snapshot, oom, ...) describe what
//     PyTorch's allocator did, not what the program asked for: they are
//     counted in the Report by name, not replayed.
//   - The history is a ring of max_entries, which drops the oldest entries.
//     A free of an address never seen allocated was allocated before the
//     ring's oldest entry: it becomes an allocation placed at the start of
//     the trace, with the free's size and stream (Report.Synthetic). In
//     such a truncated history an allocation at an address still live ends
//     the older allocation just before (Report.Implicit); in a complete
//     history it is an error.
//   - Allocations still live at the end stay live.
//   - Streams are renumbered: the legacy default stream (0) stays 0, the
//     others are numbered 1, 2, ... in order of first appearance
//     (Report.Streams).
//   - The trace is named by Options.Name; NameOf gives a file's base name
//     without .gz and .pickle. The trace passes trace.Validate.
//
// Malformed input (not a pickle, a wrong top-level shape, missing fields,
// wrong types, negative sizes) is an error matching gpumem.ErrInvalidValue
// that names the field, the device and the entry index.
package torchsnapshot

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/gzsniff"
	"github.com/gpumem/gpumem/internal/pickle"
	"github.com/gpumem/gpumem/trace"
)

// MaxSize is the largest snapshot, after decompression, that Read accepts.
const MaxSize = 4 << 30 // 4 GiB

// Entry is one action of a device's recorded history.
type Entry struct {
	Action string // alloc, free_requested, free_completed, segment_alloc, ...
	Addr   uint64
	Size   uint64
	Stream uint64 // the raw stream handle
}

// DeviceTrace is one device's recorded history, oldest entry first.
type DeviceTrace []Entry

// Snapshot is a decoded PyTorch memory snapshot: the history of each device
// and the allocator settings it was recorded with.
type Snapshot struct {
	Devices  []DeviceTrace     // device_traces, per device
	Segments int               // segments live when the snapshot was taken
	Settings map[string]string // allocator_settings, values as Python prints them (True, {'1': 0})
}

// Options tune a conversion.
type Options struct {
	// Name is the trace's name; NameOf gives the usual one for a file.
	Name string
}

// NameOf returns the name of the trace converted from a snapshot file: its
// base name without ".gz" and ".pickle".
func NameOf(path string) string {
	n := filepath.Base(path)
	n = strings.TrimSuffix(n, ".gz")
	n = strings.TrimSuffix(n, ".pickle")
	return n
}

// Report describes a conversion.
type Report struct {
	Device        int
	Entries       int            // history entries of the device
	Actions       map[string]int // entries per action
	Allocations   int            // allocations in the trace, synthetic ones included
	Frees         int
	Synthetic     int            // allocations made before the history began (ring truncation)
	Implicit      int            // frees implied by an address allocated again in a truncated history
	LiveAtEnd     int            // allocations never freed
	Streams       map[uint64]int // raw stream handle → trace stream
	PeakRequested uint64
}

// ReadFile reads a snapshot file, plain or gzip-compressed.
func ReadFile(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("torchsnapshot: %w", err)
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// IsSnapshot reports whether the first bytes of a file look like a pickle
// (plain or gzip-compressed) rather than a text trace.
func IsSnapshot(head []byte) bool {
	if gzsniff.IsGzip(head) {
		zr, err := gzip.NewReader(bytes.NewReader(head))
		if err != nil {
			return false
		}
		b := make([]byte, 2)
		n, _ := io.ReadFull(zr, b)
		return n >= 1 && b[0] == 0x80
	}
	return len(head) >= 1 && head[0] == 0x80
}

// Read decodes a snapshot, plain or gzip-compressed. Errors match
// gpumem.ErrInvalidValue and say what is wrong and where.
func Read(r io.Reader) (*Snapshot, error) {
	src, done, err := gzsniff.Open(r, 64<<10)
	if err != nil {
		return nil, readError("gzip", err)
	}
	defer done()
	fr := &firstError{r: src}
	lr := &io.LimitedReader{R: fr, N: MaxSize + 1}
	v, err := pickle.Decode(lr)
	if lr.N <= 0 {
		return nil, invalid("larger than %d bytes", int64(MaxSize))
	}
	if err != nil {
		var pe *pickle.Error
		if errors.As(err, &pe) && pe.Err != nil {
			return nil, readError(fmt.Sprintf("at byte %d", pe.Offset), pe.Err)
		}
		if errors.As(err, &pe) && fr.err != nil {
			// The decompressor's io.ErrUnexpectedEOF, which the pickle
			// reader takes for a pickle that ends early.
			return nil, readError(fmt.Sprintf("at byte %d", pe.Offset), fr.err)
		}
		return nil, fmt.Errorf("torchsnapshot: not a PyTorch memory snapshot: %w (%w)", err, gpumem.ErrInvalidValue)
	}
	return fromValue(v)
}

// firstError is a reader that keeps the first error other than io.EOF its
// reader returned: a truncated gzip stream's io.ErrUnexpectedEOF, which the
// pickle reader cannot tell from the end of a truncated pickle.
type firstError struct {
	r   io.Reader
	err error
}

func (f *firstError) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF && f.err == nil {
		f.err = err
	}
	return n, err
}

// readError wraps a failure to read: corrupt compressed data matches
// gpumem.ErrInvalidValue, a failing reader only its own error.
func readError(where string, err error) error {
	if gzsniff.Corrupt(err) {
		return fmt.Errorf("torchsnapshot: corrupt gzip data (%s): %w: %w", where, err, gpumem.ErrInvalidValue)
	}
	return fmt.Errorf("torchsnapshot: read (%s): %w", where, err)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("torchsnapshot: %s: %w", fmt.Sprintf(format, args...), gpumem.ErrInvalidValue)
}

func fromValue(v any) (*Snapshot, error) {
	top, ok := v.(*pickle.Dict)
	if !ok {
		return nil, invalid("the pickle holds a %s, not the snapshot's dict", kind(v))
	}
	dt, ok := top.Get("device_traces")
	if !ok {
		return nil, invalid("no device_traces (record with torch.cuda.memory._record_memory_history before dumping)")
	}
	devs, ok := dt.([]any)
	if !ok {
		return nil, invalid("device_traces is a %s, not a list", kind(dt))
	}
	s := &Snapshot{Devices: make([]DeviceTrace, len(devs)), Settings: map[string]string{}}
	seen := map[*any]int{} // each device's list, by its first element
	for d, dv := range devs {
		list, ok := dv.([]any)
		if !ok {
			return nil, invalid("device_traces[%d] is a %s, not a list", d, kind(dv))
		}
		if len(list) > 0 {
			// A pickle can share one list between devices; converting it
			// once per device would make the work quadratic in the input.
			if o, dup := seen[&list[0]]; dup {
				return nil, invalid("device_traces[%d] is the same list as device_traces[%d]", d, o)
			}
			seen[&list[0]] = d
		}
		entries := make(DeviceTrace, len(list))
		for i, ev := range list {
			e, err := entry(ev)
			if err != nil {
				return nil, invalid("device_traces[%d][%d]: %v", d, i, err)
			}
			entries[i] = e
		}
		s.Devices[d] = entries
	}
	if segs, ok := top.Get("segments"); ok {
		if l, ok := segs.([]any); ok {
			s.Segments = len(l)
		}
	}
	if set, ok := top.Get("allocator_settings"); ok {
		if m, ok := set.(*pickle.Dict); ok {
			for i, k := range m.Keys {
				if ks, ok := k.(string); ok {
					s.Settings[ks] = text(m.Values[i])
				}
			}
		}
	}
	return s, nil
}

// maxSettingText bounds the text of one allocator setting: shared
// sub-structures could otherwise make it exponentially long.
const maxSettingText = 4096

// text formats a settings value as Python prints it: True, None, 1.5,
// {'1': 0}, [1, 2]; cut with "..." past maxSettingText bytes.
func text(v any) string {
	var b strings.Builder
	writeText(&b, v, 0)
	if b.Len() > maxSettingText {
		return b.String()[:maxSettingText] + "..."
	}
	return b.String()
}

func writeText(b *strings.Builder, v any, depth int) {
	if b.Len() > maxSettingText {
		return
	}
	if depth > 8 {
		b.WriteString("...")
		return
	}
	seq := func(open, close string, n int, item func(i int)) {
		b.WriteString(open)
		for i := 0; i < n && b.Len() <= maxSettingText; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			item(i)
		}
		b.WriteString(close)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		if depth > 0 {
			b.WriteString("'" + x + "'")
		} else {
			b.WriteString(x)
		}
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case []any:
		seq("[", "]", len(x), func(i int) { writeText(b, x[i], depth+1) })
	case pickle.Tuple:
		seq("(", ")", len(x), func(i int) { writeText(b, x[i], depth+1) })
	case *pickle.Dict:
		seq("{", "}", x.Len(), func(i int) {
			writeText(b, x.Keys[i], depth+1)
			b.WriteString(": ")
			writeText(b, x.Values[i], depth+1)
		})
	default:
		b.WriteString(short(v))
	}
}

// short is v as text, an integer too long to print usefully summarised.
func short(v any) string {
	if x, ok := v.(*big.Int); ok && x.BitLen() > 128 {
		return fmt.Sprintf("<an integer of %d bits>", x.BitLen())
	}
	return fmt.Sprint(v)
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case *pickle.Dict:
		return "dict"
	case []any:
		return "list"
	case pickle.Tuple:
		return "tuple"
	case string:
		return "str"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

func entry(v any) (Entry, error) {
	m, ok := v.(*pickle.Dict)
	if !ok {
		return Entry{}, fmt.Errorf("a %s, not a dict", kind(v))
	}
	var e Entry
	a, ok := m.Get("action")
	if e.Action, _ = a.(string); !ok || e.Action == "" {
		return e, errors.New("no action")
	}
	field := func(name string, dst *uint64, required bool) error {
		x, ok := m.Get(name)
		if !ok {
			if required {
				return fmt.Errorf("%s entry without %s", e.Action, name)
			}
			return nil
		}
		n, ok := x.(int64)
		if !ok || n < 0 {
			return fmt.Errorf("%s is %s (%s), not a non-negative int", name, short(x), kind(x))
		}
		*dst = uint64(n)
		return nil
	}
	needed := e.Action == actionAlloc || e.Action == actionFreeRequest
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{"addr", &e.Addr}, {"size", &e.Size}, {"stream", &e.Stream}} {
		if err := field(f.name, f.dst, needed); err != nil {
			return e, err
		}
	}
	return e, nil
}

// The history actions a trace replays: gpumem's names, which are PyTorch's
// (Write writes them).
const (
	actionAlloc       = string(gpumem.ActionAlloc)
	actionFreeRequest = string(gpumem.ActionFreeRequest)
)

// Trace converts device dev's history into a trace, following the rules in
// the package documentation. The trace passes trace.Validate. Errors match
// gpumem.ErrInvalidValue and name the device and the entry. Trace only reads
// s: goroutines may convert one snapshot at once.
func (s *Snapshot) Trace(dev int, opts Options) (*trace.Trace, Report, error) {
	rep := Report{Device: dev, Actions: map[string]int{}, Streams: map[uint64]int{0: 0}}
	if dev < 0 || dev >= len(s.Devices) {
		return nil, rep, invalid("device %d: the snapshot has %d devices", dev, len(s.Devices))
	}
	entries := s.Devices[dev]
	rep.Entries = len(entries)
	streamOf := func(raw uint64) int {
		if n, ok := rep.Streams[raw]; ok {
			return n
		}
		n := len(rep.Streams)
		rep.Streams[raw] = n
		return n
	}
	type liveAlloc struct {
		id   uint64
		size uint64
	}
	live := map[uint64]liveAlloc{}
	var pre, body []trace.Event
	nextID := uint64(1)
	for i, e := range entries {
		rep.Actions[e.Action]++
		switch e.Action {
		case actionAlloc:
			if e.Size == 0 {
				return nil, rep, invalid("device %d entry %d: alloc of 0 bytes", dev, i)
			}
			if old, dup := live[e.Addr]; dup {
				if len(pre) == 0 {
					return nil, rep, invalid("device %d entry %d: alloc at %#x, which is still allocated", dev, i, e.Addr)
				}
				// A truncated history: the free was lost with the
				// ring's older entries.
				body = append(body, trace.Event{ID: old.id, Stream: streamOf(e.Stream)})
				rep.Implicit++
			}
			live[e.Addr] = liveAlloc{nextID, e.Size}
			body = append(body, trace.Event{Alloc: true, ID: nextID, Size: e.Size, Stream: streamOf(e.Stream)})
			nextID++
		case actionFreeRequest:
			st := streamOf(e.Stream)
			a, ok := live[e.Addr]
			if !ok {
				if e.Size == 0 {
					return nil, rep, invalid("device %d entry %d: free of %#x, never allocated, with no size", dev, i, e.Addr)
				}
				// Allocated before the history's oldest entry.
				a = liveAlloc{nextID, e.Size}
				nextID++
				pre = append(pre, trace.Event{Alloc: true, ID: a.id, Size: e.Size, Stream: st})
			}
			delete(live, e.Addr)
			body = append(body, trace.Event{ID: a.id, Stream: st})
		}
	}
	tr := &trace.Trace{Name: opts.Name, Events: append(pre, body...)}
	st := tr.Stats()
	rep.Allocations, rep.Frees, rep.Synthetic = st.Pairs, st.Frees, len(pre)
	rep.LiveAtEnd, rep.PeakRequested = st.LiveAtEnd, st.PeakRequested
	if err := tr.Validate(); err != nil {
		return nil, rep, fmt.Errorf("torchsnapshot: the converted trace is invalid: %w", err)
	}
	return tr, rep, nil
}

// String is a one-line summary of the conversion.
func (r Report) String() string {
	acts := make([]string, 0, len(r.Actions))
	for a := range r.Actions {
		acts = append(acts, a)
	}
	sort.Strings(acts)
	var other []string
	for _, a := range acts {
		if a != actionAlloc && a != actionFreeRequest {
			other = append(other, fmt.Sprintf("%s %d", a, r.Actions[a]))
		}
	}
	implicit := ""
	if r.Implicit > 0 {
		implicit = fmt.Sprintf(" (%d implied by a reallocated address)", r.Implicit)
	}
	return fmt.Sprintf("device %d: %d history entries -> %d allocations (%d from before the history began), %d frees%s, %d live at the end, %d streams, peak requested %s; not replayed: %v",
		r.Device, r.Entries, r.Allocations, r.Synthetic, r.Frees, implicit, r.LiveAtEnd, len(r.Streams), gpumem.FormatBytes(r.PeakRequested), other)
}
