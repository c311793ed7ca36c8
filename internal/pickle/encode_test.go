package pickle

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// roundTripValues are values Encode must write and Decode read back equal.
func roundTripValues() map[string]any {
	huge, _ := new(big.Int).SetString("-1180591620717411303424", 10)
	long := strings.Repeat("x", 300)
	many := make([]any, 2500)
	for i := range many {
		many[i] = int64(i - 1000)
	}
	d := &Dict{}
	for i := 0; i < 1200; i++ {
		_ = d.Set(int64(i), "v")
	}
	return map[string]any{
		"python":  mapToDict(want(true)),
		"ints":    []any{int64(0), int64(255), int64(256), int64(65535), int64(65536), int64(-1), int64(math.MinInt32), int64(math.MaxInt32), int64(math.MaxInt32) + 1, int64(math.MinInt64), int64(math.MaxInt64), int64(-129), int64(128)},
		"big":     huge,
		"long":    long,
		"many":    many,
		"bigdict": d,
		"floats":  []any{0.0, -2.5, math.Inf(1), math.MaxFloat64, math.SmallestNonzeroFloat64},
		"tuples":  []any{Tuple{}, Tuple{int64(1)}, Tuple{int64(1), "a"}, Tuple{nil, true, false}, Tuple{int64(1), int64(2), int64(3), int64(4)}},
		"nested":  []any{[]any{[]any{}}, &Dict{}},
		"bytes":   []any{[]byte{}, bytes.Repeat([]byte{7}, 300)},
		"unicode": "héllo ✓ 𝄞",
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	for name, v := range roundTripValues() {
		t.Run(name, func(t *testing.T) {
			raw, err := Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if g, w := plain(got), plain(v); !reflect.DeepEqual(g, w) {
				t.Fatalf("decoded %#v\nwant %#v", g, w)
			}
			again, err := Marshal(got)
			if err != nil || !bytes.Equal(again, raw) {
				t.Fatalf("re-encoding differs (%v)", err)
			}
		})
	}
}

func TestEncodeGoTypes(t *testing.T) {
	v := map[string]any{"b": []string{"x"}, "a": []int64{1}, "u": uint64(math.MaxUint64), "i": 3, "f": float32(0.5), "p": uintptr(9)}
	raw, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	d := got.(*Dict)
	if !reflect.DeepEqual(d.Keys, []any{"a", "b", "f", "i", "p", "u"}) {
		t.Errorf("keys %v, want sorted", d.Keys)
	}
	if u, _ := d.Get("u"); u.(*big.Int).String() != "18446744073709551615" {
		t.Errorf("uint64 max read back as %v", u)
	}
	if f, _ := d.Get("f"); f != 0.5 {
		t.Errorf("float32 read back as %v", f)
	}
}

func TestEncodeRefuses(t *testing.T) {
	cyc := []any{nil}
	cyc[0] = cyc
	deep := any(nil)
	for i := 0; i <= MaxDepth+1; i++ {
		deep = []any{deep}
	}
	for name, v := range map[string]any{
		"type":     struct{}{},
		"utf8":     string([]byte{0xff}),
		"cycle":    cyc,
		"deep":     deep,
		"key":      &Dict{Keys: []any{[]any{}}, Values: []any{nil}},
		"tuplekey": &Dict{Keys: []any{Tuple{[]any{}}}, Values: []any{nil}},
		"uneven":   &Dict{Keys: []any{"a"}},
		"map":      map[int]int{},
	} {
		if _, err := Marshal(v); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
	shared := []any{int64(1)}
	if _, err := Marshal([]any{shared, shared}); err != nil {
		t.Errorf("a list referenced twice (no cycle): %v", err)
	}
	var many []any
	for i := 0; i < 10; i++ {
		many = []any{many, many}
	}
	if err := encode(&bytes.Buffer{}, many, 100); !errors.Is(err, ErrUnsupported) {
		t.Errorf("over the budget of values: %v", err)
	}
}

type failWriter struct{}

var errWrite = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestEncodeWriteError(t *testing.T) {
	if err := Encode(failWriter{}, "x"); !errors.Is(err, errWrite) {
		t.Fatalf("err = %v, want the writer's", err)
	}
}

// TestPythonLoadsEncoded loads Encode's output with Python's own pickle
// module and compares its repr. It skips where python3 is absent, except
// under CI=true.
func TestPythonLoadsEncoded(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI=true")
		}
		t.Skip("python3 not found")
	}
	v := &Dict{}
	for _, kv := range [][2]any{
		{"none", nil}, {"t", true}, {"i", int64(-70000)}, {"big", int64(math.MaxInt64)},
		{"f", 1.5}, {"s", "héllo"}, {"b", []byte{0, 1}}, {"l", []any{int64(1), "a"}},
		{"tu", Tuple{int64(0), int64(0)}}, {int64(5), "intkey"},
	} {
		_ = v.Set(kv[0], kv[1])
	}
	raw, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v.pickle")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", "import pickle,sys; print(repr(pickle.load(open(sys.argv[1],'rb'))))", path).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	want := `{'none': None, 't': True, 'i': -70000, 'big': 9223372036854775807, 'f': 1.5, 's': 'héllo', 'b': b'\x00\x01', 'l': [1, 'a'], 'tu': (0, 0), 5: 'intkey'}`
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("python3 read\n%s\nwant\n%s", got, want)
	}
}
