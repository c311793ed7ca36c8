package torchsnapshot

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gpumem/gpumem"
)

// The snapshots under testdata were recorded on an NVIDIA H200 with
// PyTorch 2.11 by scripts/gpu/record_snapshot.py (train: 8 steps of a small
// GPT with a side stream; context: with Python stack frames; expandable:
// with expandable_segments:True, whose history maps segments instead of
// allocating them), then re-pickled by Python with the file paths in the
// stack frames shortened. ring.pickle.gz is train with its first 6,000
// history entries dropped, as a max_entries ring would. The expected
// figures were computed independently in Python from the same files
// (allocations counted with the synthetic ones: len(pre) + the allocs):
//
//	live={}; pre=[]; ev=[]; streams={0:0}
//	for e in s['device_traces'][0]:
//	  if e['action']=='alloc': streams.setdefault(e['stream'],len(streams)); live[e['addr']]=e['size']; ev.append(('a',e['size']))
//	  elif e['action']=='free_requested':
//	    streams.setdefault(e['stream'],len(streams))
//	    if e['addr'] in live: ev.append(('f',live.pop(e['addr'])))
//	    else: pre.append(e['size']); ev.append(('f',e['size']))
//	cur=sum(pre); peak=cur
//	for k,sz in ev: cur += sz if k=='a' else -sz; peak=max(peak,cur)
func TestConvertRealSnapshots(t *testing.T) {
	for _, c := range []struct {
		file                                       string
		allocs, frees, synthetic, liveEnd, streams int
		peak                                       uint64
		other                                      map[string]int
	}{
		{"train", 3084, 2922, 0, 162, 2, 958094408, map[string]int{"free_completed": 2920, "segment_alloc": 42}},
		{"context", 482, 392, 0, 90, 2, 357232680, map[string]int{"free_completed": 390, "segment_alloc": 21}},
		{"expandable", 700, 610, 0, 90, 2, 698277928, map[string]int{"free_completed": 608, "segment_map": 33}},
		{"ring", 1023, 1023, 100, 0, 2, 197059656, nil},
	} {
		t.Run(c.file, func(t *testing.T) {
			s, err := ReadFile(filepath.Join("testdata", c.file+".pickle.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Devices) != 1 {
				t.Fatalf("%d devices, want 1", len(s.Devices))
			}
			tr, rep, err := s.Trace(0, Options{Name: c.file})
			if err != nil {
				t.Fatal(err)
			}
			st := tr.Stats()
			if st.Pairs != c.allocs || st.Frees != c.frees || rep.Synthetic != c.synthetic ||
				st.LiveAtEnd != c.liveEnd || len(rep.Streams) != c.streams || st.PeakRequested != c.peak {
				t.Errorf("allocs %d frees %d synthetic %d live %d streams %d peak %d; want %d %d %d %d %d %d",
					st.Pairs, st.Frees, rep.Synthetic, st.LiveAtEnd, len(rep.Streams), st.PeakRequested,
					c.allocs, c.frees, c.synthetic, c.liveEnd, c.streams, c.peak)
			}
			for a, n := range c.other {
				if rep.Actions[a] != n {
					t.Errorf("%s: %d entries, want %d", a, rep.Actions[a], n)
				}
			}
			if err := tr.Validate(); err != nil {
				t.Error(err)
			}
			if c.synthetic > 0 {
				for i, e := range tr.Events[:c.synthetic] {
					if !e.Alloc {
						t.Fatalf("event %d of the synthetic prefix is a free", i)
					}
				}
			}
			if !strings.Contains(rep.String(), fmt.Sprintf("%d allocations", c.allocs)) {
				t.Errorf("report %q", rep.String())
			}
		})
	}
	s, err := ReadFile(filepath.Join("testdata", "train.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	// From the same Python session: s['allocator_settings'].
	if s.Settings["expandable_segments"] != "False" || s.Settings["PYTORCH_CUDA_ALLOC_CONF"] != "" ||
		s.Settings["max_split_size"] != "-1" || !strings.HasPrefix(s.Settings["roundup_power2_divisions"], "{'1': 0, '2': 0,") {
		t.Errorf("settings %v", s.Settings)
	}
	// The side stream's handle, as Python printed it: {0: 0, 1029843968: 1}.
	if _, rep, err := s.Trace(0, Options{}); err != nil || len(rep.Streams) != 2 || rep.Streams[0] != 0 || rep.Streams[1029843968] != 1 {
		t.Errorf("streams %v (%v)", rep.Streams, err)
	}
	e, err := ReadFile(filepath.Join("testdata", "expandable.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Settings["PYTORCH_CUDA_ALLOC_CONF"] != "expandable_segments:True" || e.Settings["expandable_segments"] != "True" {
		t.Errorf("settings %v", e.Settings)
	}
	if _, _, err := s.Trace(1, Options{}); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("device 1 of a one-device snapshot: %v", err)
	}
}

func TestIsSnapshot(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "train.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var plainTrace bytes.Buffer
	zw := gzip.NewWriter(&plainTrace)
	zw.Write([]byte("a 1 512 0\n"))
	zw.Close()
	for _, c := range []struct {
		name string
		head []byte
		want bool
	}{
		{"gzip pickle", raw[:512], true},
		{"plain pickle", []byte{0x80, 4, 0x95}, true},
		{"gzip trace", plainTrace.Bytes(), false},
		{"text trace", []byte("a 1 512 0\n"), false},
		{"empty", nil, false},
	} {
		if got := IsSnapshot(c.head); got != c.want {
			t.Errorf("%s: IsSnapshot = %v", c.name, got)
		}
	}
}

// pk builds small protocol-4 pickles for the malformed-input tests.
func pk(parts ...string) []byte { return []byte("\x80\x04" + strings.Join(parts, "") + ".") }

func str(s string) string { return "\x8c" + string(rune(len(s))) + s }

func TestMalformed(t *testing.T) {
	entry := func(kv ...string) string { return "}(" + strings.Join(kv, "") + "u" }
	dev := func(entries ...string) string { return "](" + strings.Join(entries, "") + "e" }
	top := func(devs ...string) []byte {
		return pk("}(", str("device_traces"), "](", strings.Join(devs, ""), "e", "u")
	}
	for _, c := range []struct {
		name string
		in   []byte
		msg  string
	}{
		{"not a pickle", []byte("a 1 512 0\n"), "not a PyTorch memory snapshot"},
		{"a list", pk("]"), "list, not the snapshot's dict"},
		{"no traces", pk("}"), "no device_traces"},
		{"traces not a list", pk("}(", str("device_traces"), "K\x01u"), "not a list"},
		{"entry not a dict", top(dev("K\x01")), "device_traces[0][0]: a int"},
		{"no action", top(dev(entry(str("addr"), "K\x01"))), "no action"},
		{"alloc without size", top(dev(entry(str("action"), str("alloc"), str("addr"), "K\x01", str("stream"), "K\x00"))), "without size"},
		{"negative size", top(dev(entry(str("action"), str("alloc"), str("addr"), "K\x01", str("size"), "J\xff\xff\xff\xff", str("stream"), "K\x00"))), "size is -1"},
		{"code", pk("\x8c\x02os\x8c\x06system\x93"), "STACK_GLOBAL"},
		// A 4,000-bit address: summarised, not printed in 1,200 digits.
		{"huge address", top(dev(entry(str("action"), str("alloc"), str("addr"), "\x8b\xf4\x01\x00\x00"+strings.Repeat("\x5a", 500), str("size"), "K\x01"))), "addr is <an integer of 3999 bits> (int)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.in))
			if !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.msg)
			}
		})
	}
	// Well-formed entries, impossible history: an address allocated twice.
	alloc := entry(str("action"), str("alloc"), str("addr"), "K\x40", str("size"), "M\x00\x02", str("stream"), "K\x00")
	s, err := Read(bytes.NewReader(top(dev(alloc, alloc))))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Trace(0, Options{}); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "still allocated") {
		t.Fatalf("double allocation: %v", err)
	}
}

func ExampleSnapshot_Trace() {
	s, err := ReadFile(filepath.Join("testdata", "train.pickle.gz"))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, rep, err := s.Trace(0, Options{Name: NameOf("train.pickle.gz")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(tr.Events), "events;", rep.Allocations, "allocations on", len(rep.Streams), "streams")
	// Output: 6006 events; 3084 allocations on 2 streams
}

// history builds a one-device snapshot from (action, addr, size, stream)
// entries.
func history(entries ...[4]any) []byte {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString("}(" + str("action") + str(e[0].(string)))
		for i, k := range []string{"addr", "size", "stream"} {
			v := e[i+1].(int)
			b.WriteString(str(k) + "J" + string([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}))
		}
		b.WriteString("u")
	}
	return pk("}(", str("device_traces"), "](](", b.String(), "e", "e", "u")
}

func TestConvertRules(t *testing.T) {
	in := history(
		[4]any{"segment_alloc", 0x1000, 4096, 0},
		[4]any{"alloc", 0x1000, 100, 77},          // stream 77 -> 1
		[4]any{"free_requested", 0x9000, 300, 55}, // allocated before the history: synthetic, stream 55 -> 2
		[4]any{"alloc", 0x2000, 200, 0},
		[4]any{"free_requested", 0x1000, 100, 77},
		[4]any{"free_completed", 0x1000, 100, 77},
		[4]any{"alloc", 0x1000, 50, 55}, // address reused after its free
		[4]any{"alloc", 0x2000, 60, 0},  // its free was lost: implied
		[4]any{"weird_action", 0, 0, 0},
	)
	s, err := Read(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tr, rep, err := s.Trace(0, Options{Name: "rules"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tr.Events {
		got = append(got, e.String())
	}
	// IDs in order of first sight: the synthetic allocation is the second.
	want := []string{"a 2 300 2", "a 1 100 1", "f 2 2", "a 3 200 0", "f 1 1", "a 4 50 2", "f 3 0", "a 5 60 0"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("events\n%q\nwant\n%q", got, want)
	}
	if rep.Synthetic != 1 || rep.Implicit != 1 || rep.LiveAtEnd != 2 || rep.Actions["weird_action"] != 1 ||
		rep.Actions["segment_alloc"] != 1 || rep.Actions["free_completed"] != 1 || tr.Name != "rules" {
		t.Errorf("report %+v", rep)
	}
	if !strings.Contains(rep.String(), "weird_action 1") {
		t.Errorf("report %q does not name the unknown action", rep.String())
	}
	if rep.Streams[77] != 1 || rep.Streams[55] != 2 || rep.Streams[0] != 0 {
		t.Errorf("streams %v", rep.Streams)
	}
}

func TestNameOf(t *testing.T) {
	for in, want := range map[string]string{"a/b/x.pickle.gz": "x", "x.pickle": "x", "run.gz": "run", "snap": "snap"} {
		if got := NameOf(in); got != want {
			t.Errorf("NameOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadFailures(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "train.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), raw...)
	for i := 20; i < 200; i++ {
		corrupt[i] ^= 0x5a
	}
	for name, in := range map[string][]byte{
		"truncated gzip":   raw[:len(raw)/2],
		"corrupt gzip":     corrupt,
		"gzip header only": raw[:5],
	} {
		if _, err := Read(bytes.NewReader(in)); !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: %v, want ErrInvalidValue", name, err)
		}
	}
	cause := errors.New("disk on fire")
	for name, in := range map[string][]byte{"plain": []byte("\x80\x04}(" + str("device_traces")), "gzip": raw[:len(raw)/2]} {
		_, err := Read(io.MultiReader(bytes.NewReader(in), iotest.ErrReader(cause)))
		if !errors.Is(err, cause) || errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("%s: a failing reader gave %v: want its error, not ErrInvalidValue", name, err)
		}
	}
}

// TestSharedStructures: a pickle can make one list appear many times; the
// decoder must not do work per appearance.
func TestSharedStructures(t *testing.T) {
	// device_traces = [L, L]: refused, as converting each would be
	// quadratic in the input.
	entry := "}(" + str("action") + str("alloc") + str("addr") + "K\x40" + str("size") + "M\x00\x02" + str("stream") + "K\x00u"
	in := pk("}(", str("device_traces"), "](](", entry, "e\x94h\x00e", "u")
	if _, err := Read(bytes.NewReader(in)); !errors.Is(err, gpumem.ErrInvalidValue) || !strings.Contains(err.Error(), "same list") {
		t.Errorf("a history shared by two devices: %v", err)
	}
	// allocator_settings = {'x': A8} where A(k) = [A(k-1)] * 50: 50^8
	// leaves if printed in full.
	var b strings.Builder
	b.WriteString("K\x01\x94")
	for k := 1; k <= 8; k++ {
		b.WriteString("](")
		for i := 0; i < 50; i++ {
			b.WriteString("h" + string(rune(k-1)))
		}
		b.WriteString("e\x940")
	}
	in = pk(b.String(), "0}(", str("device_traces"), "]", str("allocator_settings"), "}", str("x"), "h\x08su")
	s, err := Read(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if x := s.Settings["x"]; len(x) > maxSettingText+3 || !strings.HasPrefix(x, "[[[[[[[[1, 1,") || !strings.HasSuffix(x, "...") {
		t.Errorf("setting of %d bytes: %.60q", len(x), x)
	}
}

// TestConcurrentTrace: a Snapshot is only read by Trace, so goroutines may
// convert it at once (run under -race).
func TestConcurrentTrace(t *testing.T) {
	s, err := ReadFile(filepath.Join("testdata", "context.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			tr, _, err := s.Trace(0, Options{})
			if err == nil && tr.Stats().Pairs != 482 {
				err = fmt.Errorf("%d allocations, want 482", tr.Stats().Pairs)
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func ExampleRead() {
	f, err := os.Open(filepath.Join("testdata", "expandable.pickle.gz"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(s.Devices), "device;", len(s.Devices[0]), "history entries; recorded with", s.Settings["PYTORCH_CUDA_ALLOC_CONF"])
	// Output: 1 device; 1951 history entries; recorded with expandable_segments:True
}

// A gzip-compressed snapshot cut short is reported as truncated compressed
// data (wrapping io.ErrUnexpectedEOF), not as a file that is no snapshot.
func TestReadTruncatedGzip(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "train.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{len(raw) / 3, len(raw) / 2, len(raw) - 10} {
		_, err := Read(bytes.NewReader(raw[:cut]))
		if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, gpumem.ErrInvalidValue) ||
			strings.Contains(fmt.Sprint(err), "not a PyTorch memory snapshot") {
			t.Errorf("gzip cut at %d of %d: %v; want corrupt gzip data wrapping io.ErrUnexpectedEOF", cut, len(raw), err)
		}
	}
}
