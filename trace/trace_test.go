package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gpumem/gpumem"
)

const sample = `a 1 100 0
a 2 300 1
f 1 0

# a comment
# recorded by a PyTorch program: a comment of more than five words
	#indented, and glued to its hash
a 3 50 0
f 2 0
`

func TestReadPlain(t *testing.T) {
	tr, err := Read(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Alloc: true, ID: 1, Size: 100, Stream: 0},
		{Alloc: true, ID: 2, Size: 300, Stream: 1},
		{ID: 1, Stream: 0},
		{Alloc: true, ID: 3, Size: 50, Stream: 0},
		{ID: 2, Stream: 0},
	}
	if !reflect.DeepEqual(tr.Events, want) {
		t.Fatalf("events = %+v", tr.Events)
	}
	st := tr.Stats()
	if st.Pairs != 3 || st.Frees != 2 || st.LiveAtEnd != 1 || st.PeakRequested != 400 ||
		st.TotalBytes != 450 || st.MaxSize != 300 || !reflect.DeepEqual(st.Streams, []int{0, 1}) {
		t.Fatalf("stats = %+v", st)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestReadGzipAndRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(sample))
	zw.Close()
	gz, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := Read(strings.NewReader(sample))
	if !reflect.DeepEqual(gz.Events, plain.Events) {
		t.Fatal("gzip and plain differ")
	}
	var out bytes.Buffer
	if err := Write(&out, gz); err != nil {
		t.Fatal(err)
	}
	again, err := Read(&out)
	if err != nil || !reflect.DeepEqual(again.Events, gz.Events) {
		t.Fatalf("write/read round trip: %v", err)
	}
}

func TestReadCRLFAndNoFinalNewline(t *testing.T) {
	tr, err := Read(strings.NewReader("a 1 10 0\r\nf 1 2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 2 || tr.Events[1].Stream != 2 {
		t.Fatalf("events = %+v", tr.Events)
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		in   string
		line int
		want string
	}{
		{"x 1 2 3\n", 1, "unknown op"},
		{"a 1 2\n", 1, "missing field"},
		{"a 1\n", 1, "missing field"},
		{"f 1\n", 1, "missing field"},
		{"a 1 10 0\na 1 10 0\n", 2, "duplicate allocation ID 1"},
		{"a 1 10 0\nf 2 0\n", 2, "free of unknown ID 2"},
		{"a 1 10 0\nf 1 0\nf 1 0\n", 3, "already freed"},
		{"a 1 0 0\n", 1, "size 0"},
		{"a 1 10 -1\n", 1, "negative stream"},
		{"f 1 -2\n", 1, "negative stream"},
		{"a 1 10 0 extra\n", 1, "trailing garbage"},
		{"f 1 0 0\n", 1, "trailing garbage"},
		{"a 1 10 0 x y z\n", 1, "trailing garbage"},
		{"a x 10 0\n", 1, "bad ID"},
		{"a 1 1e3 0\n", 1, "bad size"},
		{"a 1 99999999999999999999 0\n", 1, "bad size"},
		{"a 1 10 99999999999\n", 1, "bad stream"},
		{"\n\na 1 10 0\nalloc 2 3 0\n", 4, "unknown op"},
	}
	for _, tc := range tests {
		_, err := Read(strings.NewReader(tc.in))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Read(%q) = %v, want a ParseError", tc.in, err)
			continue
		}
		if pe.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%q) = %v, want line %d and %q", tc.in, err, tc.line, tc.want)
		}
		if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("Read(%q): %v does not match ErrInvalidValue", tc.in, err)
		}
		if !strings.Contains(err.Error(), "line ") {
			t.Errorf("Read(%q): %v does not name the line", tc.in, err)
		}
	}
}

func TestReadBadGzip(t *testing.T) {
	_, err := Read(bytes.NewReader([]byte{0x1f, 0x8b, 0, 1, 2}))
	if !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Fatalf("truncated gzip: %v", err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("a 1 10 0\nf 1 0\n"))
	zw.Close()
	b := buf.Bytes()
	if _, err := Read(bytes.NewReader(b[:len(b)-6])); err == nil {
		t.Fatal("truncated gzip stream read without error")
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.trace"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestReadFileNameInErrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.trace")
	os.WriteFile(p, []byte("a 1 10 0\nq\n"), 0o644)
	_, err := ReadFile(p)
	if err == nil || !strings.Contains(err.Error(), "bad: line 2") {
		t.Fatalf("error %v does not name the trace and line", err)
	}
}

func TestValidate(t *testing.T) {
	bad := []*Trace{
		{Events: []Event{{Alloc: true, ID: 1, Size: 0}}},
		{Events: []Event{{Alloc: true, ID: 1, Size: 1, Stream: -1}}},
		{Events: []Event{{ID: 1}}},
		{Events: []Event{{Alloc: true, ID: 1, Size: 1}, {Alloc: true, ID: 1, Size: 1}}},
		{Events: []Event{{Alloc: true, ID: 1, Size: 1}, {ID: 1}, {ID: 1}}},
	}
	for i, tr := range bad {
		if err := tr.Validate(); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("case %d: Validate() = %v", i, err)
		}
	}
}

func TestNameOf(t *testing.T) {
	for in, want := range map[string]string{
		"x/gpt2.trace.gz": "gpt2", "mix2.trace": "mix2", "a.txt": "a.txt", "dir/b.gz": "b",
	} {
		if got := NameOf(in); got != want {
			t.Errorf("NameOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// The shared traces recorded from real PyTorch programs: the counts and
// peaks their README gives.
func TestSharedTraces(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "traces")
	for _, tc := range []struct {
		file  string
		pairs int
		peak  uint64
	}{
		{"gpt2.trace.gz", 34219, 13271941480},
		{"mix2.trace.gz", 12035, 7950298216},
	} {
		p := filepath.Join(dir, tc.file)
		if _, err := os.Stat(p); err != nil {
			t.Skipf("the shared traces are not beside the repository (%v); CI provides them", err)
		}
		tr, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st := tr.Stats()
		if st.Pairs != tc.pairs || st.PeakRequested != tc.peak {
			t.Errorf("%s: %d allocations, peak %d; want %d, %d", tc.file, st.Pairs, st.PeakRequested, tc.pairs, tc.peak)
		}
		if tr.Name != NameOf(tc.file) {
			t.Errorf("name %q", tr.Name)
		}
	}
}

func BenchmarkReadGPT2(b *testing.B) {
	p := filepath.Join("..", "..", "shared", "traces", "gpt2.trace.gz")
	data, err := os.ReadFile(p)
	if err != nil {
		b.Skipf("shared trace not present: %v", err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteRefusesWhatReadRefuses: Write of a nil or invalid trace is an
// error and writes nothing, so that it never makes a file Read refuses.
func TestWriteRefusesWhatReadRefuses(t *testing.T) {
	for name, tr := range map[string]*Trace{
		"nil":             nil,
		"negative stream": {Events: []Event{{Alloc: true, ID: 1, Size: 5, Stream: -1}}},
		"id twice":        {Events: []Event{{Alloc: true, ID: 1, Size: 5}, {Alloc: true, ID: 1, Size: 7}}},
	} {
		var b bytes.Buffer
		if err := Write(&b, tr); !errors.Is(err, gpumem.ErrInvalidValue) || b.Len() != 0 {
			t.Errorf("%s: Write = %v with %d bytes written, want ErrInvalidValue and nothing", name, err, b.Len())
		}
	}
}

// A gzip stream cut in the middle of a line is reported as truncated
// compressed data, not as a malformed line made of the cut line's first
// half; the same for a reader that fails mid-line.
func TestReadTruncatedMidLine(t *testing.T) {
	var plain bytes.Buffer
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&plain, "a %d %d 0\n", i, 1000+i)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(plain.Bytes())
	zw.Close()
	z := buf.Bytes()
	for _, cut := range []int{len(z) / 3, len(z) / 2, len(z) - 10} {
		_, err := Read(bytes.NewReader(z[:cut]))
		var pe *ParseError
		if errors.As(err, &pe) || !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("gzip cut at %d of %d: %v; want a corrupt-input error wrapping io.ErrUnexpectedEOF", cut, len(z), err)
		}
	}
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("a 1 10 0\na 2 1"), iotest.ErrReader(boom))
	_, err := Read(r)
	var pe *ParseError
	if errors.As(err, &pe) || !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("reader failing mid-line: %v; want its error at line 2", err)
	}
}
