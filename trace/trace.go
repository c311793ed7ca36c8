// Package trace reads and writes allocation traces: the sequence of
// allocation and free requests a program made, one event a line.
//
//	a ID SIZE STREAM     an allocation of SIZE bytes (as asked, before rounding) on STREAM
//	f ID STREAM          the free of allocation ID (STREAM: where the free was ordered)
//
// IDs are unique within a trace; STREAM is a small non-negative integer, 0
// being the program's main stream. Fields are separated by spaces or tabs.
// Blank lines and lines starting with '#' are ignored. Files may be plain
// text or gzip-compressed; Read tells them apart by the gzip magic bytes.
//
// A trace may end with allocations still live (a program's last tensors); a
// replay leaves them live. The peak of live requested bytes is the floor no
// allocator can go under.
package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/gzsniff"
)

// Event is one request of a trace.
type Event struct {
	Alloc  bool   // true: an allocation; false: a free
	ID     uint64 // the allocation's identifier
	Size   uint64 // bytes asked for (allocations only)
	Stream int    // the stream the request was made on
}

// Trace is a parsed trace.
type Trace struct {
	Name   string // a short name: the file's base name without .trace/.gz, or as given
	Events []Event
}

// Stats summarise a trace.
type Stats struct {
	Pairs         int    // allocations (each a potential allocate/free pair)
	Frees         int    // frees
	LiveAtEnd     int    // allocations never freed
	PeakRequested uint64 // the largest sum of live requested bytes (saturates at math.MaxUint64)
	TotalBytes    uint64 // the sum of every allocation's size (saturates at math.MaxUint64)
	MaxSize       uint64 // the largest single allocation
	Streams       []int  // the distinct streams used, ascending
}

// ParseError is a malformed trace: which line and what is wrong. It matches
// gpumem.ErrInvalidValue.
type ParseError struct {
	Name   string // the trace's name, "" when unknown
	Line   int    // 1-based line number
	Text   string // the line (shortened when long)
	Reason string
}

// Error formats the error with the line number.
func (e *ParseError) Error() string {
	name := e.Name
	if name == "" {
		name = "trace"
	}
	return fmt.Sprintf("gpumem: %s: line %d: %s: %q", name, e.Line, e.Reason, e.Text)
}

// Unwrap returns gpumem.ErrInvalidValue.
func (e *ParseError) Unwrap() error { return gpumem.ErrInvalidValue }

// MaxStream is the largest stream number accepted.
const MaxStream = math.MaxInt32

// ReadFile reads a trace file, plain or gzip-compressed. The trace's Name is
// the file's base name without ".gz" and ".trace".
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gpumem: trace: %w", err)
	}
	defer f.Close()
	return read(f, NameOf(path))
}

// NameOf returns the short name of a trace file: its base name without
// ".gz" and ".trace".
func NameOf(path string) string {
	n := filepath.Base(path)
	n = strings.TrimSuffix(n, ".gz")
	n = strings.TrimSuffix(n, ".trace")
	return n
}

// Read reads a trace, plain or gzip-compressed, and checks it: every line
// well formed, IDs unique, frees only of live allocations, sizes above zero.
func Read(r io.Reader) (*Trace, error) { return read(r, "") }

func read(r io.Reader, name string) (*Trace, error) {
	br, done, err := gzsniff.Open(r, 1<<16)
	if err != nil {
		return nil, fmt.Errorf("gpumem: %s: gzip: %w: %w", nameOr(name), err, gpumem.ErrInvalidValue)
	}
	defer done()
	t := &Trace{Name: name}
	live := idStates{}
	lineNo := 0
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, &ParseError{Name: name, Line: lineNo + 1, Text: short(line), Reason: "line too long"}
		}
		if err != nil && err != io.EOF {
			// The read failed before the line's end: what came of the
			// line is a fragment, and the failure is what to report.
			if gzsniff.Corrupt(err) {
				return nil, fmt.Errorf("gpumem: %s: line %d: corrupt input: %w: %w", nameOr(name), lineNo+1, err, gpumem.ErrInvalidValue)
			}
			return nil, fmt.Errorf("gpumem: %s: line %d: %w", nameOr(name), lineNo+1, err)
		}
		if len(line) > 0 {
			lineNo++
			ev, skip, reason := parseLine(line)
			if reason != "" {
				return nil, &ParseError{Name: name, Line: lineNo, Text: short(line), Reason: reason}
			}
			if !skip {
				if reason := live.track(ev); reason != "" {
					return nil, &ParseError{Name: name, Line: lineNo, Text: short(line), Reason: reason}
				}
				t.Events = append(t.Events, ev)
			}
		}
		if err == io.EOF {
			break
		}
	}
	return t, nil
}

func nameOr(name string) string {
	if name == "" {
		return "trace"
	}
	return name
}

func short(line []byte) string {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) > 80 {
		return string(line[:77]) + "..."
	}
	return string(line)
}

// parseLine parses one line. skip is true for blank and comment lines;
// reason is non-empty when the line is malformed.
func parseLine(line []byte) (ev Event, skip bool, reason string) {
	var f [5][]byte
	n := 0
	for i := 0; i < len(line); {
		c := line[i]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			i++
			continue
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\r' && line[j] != '\n' {
			j++
		}
		if n == 0 && line[i] == '#' {
			return ev, true, "" // a comment, however many words it has
		}
		if n == len(f) {
			return ev, false, "trailing garbage after the event"
		}
		f[n] = line[i:j]
		n++
		i = j
	}
	if n == 0 {
		return ev, true, ""
	}
	var want int
	switch string(f[0]) {
	case "a":
		ev.Alloc, want = true, 4
	case "f":
		want = 3
	default:
		return ev, false, fmt.Sprintf("unknown op %q (want a or f)", f[0])
	}
	if n < want {
		if ev.Alloc {
			return ev, false, "missing field (want: a ID SIZE STREAM)"
		}
		return ev, false, "missing field (want: f ID STREAM)"
	}
	if n > want {
		return ev, false, "trailing garbage after the event"
	}
	var ok bool
	if ev.ID, ok = parseUint(f[1]); !ok {
		return ev, false, fmt.Sprintf("bad ID %q", f[1])
	}
	st := f[want-1]
	if len(st) > 0 && st[0] == '-' {
		return ev, false, fmt.Sprintf("negative stream %s", st)
	}
	s, ok := parseUint(st)
	if !ok || s > MaxStream {
		return ev, false, fmt.Sprintf("bad stream %q", st)
	}
	ev.Stream = int(s)
	if ev.Alloc {
		if ev.Size, ok = parseUint(f[2]); !ok {
			return ev, false, fmt.Sprintf("bad size %q", f[2])
		}
		if ev.Size == 0 {
			return ev, false, "size 0"
		}
	}
	return ev, false, ""
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// Stats computes the trace's summary. Events that a checked trace could not
// hold (a free of an unknown or already freed ID) are ignored: they count
// as no free and add no stream. Sums that would pass
// math.MaxUint64 (sizes near 2^63 and above) saturate there instead of
// wrapping round to small numbers.
func (t *Trace) Stats() Stats {
	var st Stats
	live := make(map[uint64]uint64, 1024)
	streams := map[int]bool{}
	var cur uint64
	for _, e := range t.Events {
		if e.Alloc {
			streams[e.Stream] = true
			st.Pairs++
			st.TotalBytes = satAdd(st.TotalBytes, e.Size)
			if e.Size > st.MaxSize {
				st.MaxSize = e.Size
			}
			if old, ok := live[e.ID]; ok {
				cur = satSub(cur, old)
			}
			live[e.ID] = e.Size
			cur = satAdd(cur, e.Size)
			if cur > st.PeakRequested {
				st.PeakRequested = cur
			}
			continue
		}
		if sz, ok := live[e.ID]; ok {
			st.Frees++
			streams[e.Stream] = true
			cur = satSub(cur, sz)
			delete(live, e.ID)
		}
	}
	st.LiveAtEnd = len(live)
	for s := range streams {
		st.Streams = append(st.Streams, s)
	}
	sort.Ints(st.Streams)
	return st
}

// satAdd is a+b, or math.MaxUint64 when that overflows.
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// satSub is a-b, or 0 when b is larger (after a saturated sum).
func satSub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// Validate checks a trace built in memory by the rules Read applies.
func (t *Trace) Validate() error {
	live := idStates{}
	for i, e := range t.Events {
		var reason string
		switch {
		case e.Stream < 0 || e.Stream > MaxStream:
			reason = fmt.Sprintf("bad stream %d", e.Stream)
		case e.Alloc && e.Size == 0:
			reason = "size 0"
		default:
			reason = live.track(e)
		}
		if reason != "" {
			return &ParseError{Name: t.Name, Line: i + 1, Text: e.String(), Reason: reason}
		}
	}
	return nil
}

// idStates follows allocation IDs through a trace: true while live, false
// once freed.
type idStates map[uint64]bool

// track applies e, or returns why a trace cannot hold it: an allocation's ID
// must be new, a free's ID live.
func (m idStates) track(e Event) string {
	state, seen := m[e.ID]
	switch {
	case e.Alloc && seen:
		return fmt.Sprintf("duplicate allocation ID %d", e.ID)
	case !e.Alloc && !seen:
		return fmt.Sprintf("free of unknown ID %d", e.ID)
	case !e.Alloc && !state:
		return fmt.Sprintf("free of ID %d that was already freed", e.ID)
	}
	m[e.ID] = e.Alloc
	return ""
}

// String formats the event as a trace line (without the newline).
func (e Event) String() string {
	if e.Alloc {
		return fmt.Sprintf("a %d %d %d", e.ID, e.Size, e.Stream)
	}
	return fmt.Sprintf("f %d %d", e.ID, e.Stream)
}

// Write writes the trace's events as plain text, one a line. A trace that
// Validate refuses (or nil) is an error matching gpumem.ErrInvalidValue,
// and nothing is written: Write never makes a file that Read refuses.
func Write(w io.Writer, t *Trace) error {
	if t == nil {
		return fmt.Errorf("gpumem: trace: write: nil trace: %w", gpumem.ErrInvalidValue)
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("gpumem: trace: write: %w", err)
	}
	bw := bufio.NewWriter(w)
	for _, e := range t.Events {
		if _, err := bw.WriteString(e.String()); err != nil {
			return fmt.Errorf("gpumem: trace: write: %w", err)
		}
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gpumem: trace: write: %w", err)
	}
	return nil
}
