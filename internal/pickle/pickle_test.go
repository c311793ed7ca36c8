package pickle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// The files under testdata were written by Python 3.12's pickle.dumps of the
// value that want builds (see the generator in the package's testdata
// README): data-p3..p5 at protocols 3 to 5, nobytes-p0..p2 at protocols 0 to
// 2 without the bytes entry (protocols below 3 pickle bytes by calling a
// function, which the decoder refuses).
func want(withBytes bool) map[any]any {
	huge, _ := new(big.Int).SetString("1180591620717411303424", 10)
	neg := new(big.Int).Neg(huge)
	shared := []any{int64(1), int64(2)}
	m := map[any]any{
		"none": nil, "t": true, "f": false, "small": int64(7), "neg": int64(-3), "i16": int64(40000),
		"i32": int64(-2000000000), "big": int64(1795324309407822), "huge": huge, "neghuge": neg,
		"float": 1.5, "list": []any{int64(1), "a", []any{2.5}}, "tuple": Tuple{int64(0), int64(0)},
		"t1": Tuple{int64(1)}, "t3": Tuple{int64(1), int64(2), int64(3)}, "empty": []any(nil),
		"etuple": Tuple{}, "edict": map[any]any{}, int64(5): "intkey", "shared": []any{shared, shared},
	}
	if withBytes {
		m["str"] = "héllo"
		m["bytes"] = []byte{0, 1}
	} else {
		m["str"] = "héllo\\u\n"
	}
	return m
}

// plain turns decoded values into comparable Go values.
func plain(v any) any {
	switch x := v.(type) {
	case *Dict:
		m := map[any]any{}
		for i, k := range x.Keys {
			m[k] = plain(x.Values[i])
		}
		return m
	case []any:
		if len(x) == 0 {
			return []any(nil)
		}
		out := make([]any, len(x))
		for i := range x {
			out[i] = plain(x[i])
		}
		return out
	case Tuple:
		out := make(Tuple, len(x))
		for i := range x {
			out[i] = plain(x[i])
		}
		return out
	case *big.Int:
		return x.String()
	}
	return v
}

func TestDecodePythonPickles(t *testing.T) {
	for _, c := range []struct {
		file  string
		bytes bool
	}{
		{"nobytes-p0.pickle", false}, {"nobytes-p1.pickle", false}, {"nobytes-p2.pickle", false},
		{"data-p3.pickle", true}, {"data-p4.pickle", true}, {"data-p5.pickle", true},
	} {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			v, err := Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			d, ok := v.(*Dict)
			if !ok {
				t.Fatalf("top level is %T, want *Dict", v)
			}
			got := plain(d).(map[any]any)
			exp := plain(mapToDict(want(c.bytes))).(map[any]any)
			for k, ev := range exp {
				if gv, ok := got[k]; !ok || !reflect.DeepEqual(gv, ev) {
					t.Errorf("%v: got %#v, want %#v", k, gv, ev)
				}
			}
			if len(got) != len(exp) {
				t.Errorf("%d keys, want %d", len(got), len(exp))
			}
			if v, ok := d.Get("small"); !ok || v != int64(7) {
				t.Errorf("Get(small) = %v, %v", v, ok)
			}
			if v, ok := d.Get(int64(5)); !ok || v != "intkey" {
				t.Errorf("Get(5) = %v, %v", v, ok)
			}
			if _, ok := d.Get("absent"); ok {
				t.Error("Get of an absent key found something")
			}
		})
	}
}

func mapToDict(m map[any]any) *Dict {
	d := &Dict{}
	for k, v := range m {
		if mm, ok := v.(map[any]any); ok {
			v = mapToDict(mm)
		}
		d.set(k, v)
	}
	return d
}

func TestRefusesCode(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "global.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode(bytes.NewReader(raw))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "GLOBAL") {
		t.Fatalf("a pickle that imports a class decoded or failed unclearly: %v", err)
	}
}

func TestHostileInput(t *testing.T) {
	deep := bytes.Repeat([]byte{']'}, MaxDepth+10)
	for i := 0; i < MaxDepth+9; i++ {
		deep = append(deep, 'a')
	}
	deep = append(deep, '.')
	// Shared tuples doubling at each level: 2^60 leaves if walked naively.
	var doubling []byte
	doubling = append(doubling, 'K', 1, 0x94)
	for i := 0; i < 60; i++ {
		doubling = append(doubling, 'h', byte(i), 'h', byte(i), 0x86, 0x94)
	}
	// The same doubling tuple as the key of many SETITEMs: checked once.
	sharedKey := []byte{'}', 'K', 1, 0x94, '0'}
	for i := 0; i < 60; i++ {
		sharedKey = append(sharedKey, 'h', byte(i), 'h', byte(i), 0x86, 0x94, '0')
	}
	for i := 0; i < 1000; i++ {
		sharedKey = append(sharedKey, 'h', 60, 'K', byte(i), 's')
	}
	sharedKey = append(sharedKey, '.')
	doubling = append(doubling, '.')
	for _, c := range []struct {
		name string
		in   []byte
		msg  string // "" when it must decode
	}{
		{"empty", nil, "end of input"},
		{"truncated string", []byte{0x80, 4, 0x8c, 10, 'a', 'b'}, "end of input"},
		{"huge length", []byte{0x80, 4, 0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "limit"},
		{"negative LONG4", []byte{0x8b, 0xff, 0xff, 0xff, 0xff, '.'}, "negative"},
		{"huge LONG4", append([]byte{0x8b, 0x01, 0x08, 0, 0}, bytes.Repeat([]byte{0x5a}, 2049)...), "LONG4 of 2049 bytes"},
		{"unknown opcode", []byte{0x80, 4, 'R', '.'}, "REDUCE"},
		{"underflow", []byte{'a', '.'}, "underflow"},
		{"stop on empty stack", []byte{'.'}, "underflow"},
		{"bad memo", []byte{'h', 3, '.'}, "memo key 3"},
		{"append to int", []byte{'K', 1, 'K', 2, 'a', '.'}, "APPEND to a int64"},
		{"odd setitems", []byte{'}', '(', 'K', 1, 'u', '.'}, "odd"},
		{"unhashable key", []byte{'}', ']', 'K', 1, 's', '.'}, "unhashable"},
		{"too deep", deep, "nested"},
		{"too many marks", bytes.Repeat([]byte{'('}, MaxDepth+1), "MARK"},
		{"long text integer", append(append([]byte{'L'}, bytes.Repeat([]byte{'9'}, 5000)...), '\n', '.'), "5000 digits"},
		{"text without newline", append([]byte{'I'}, bytes.Repeat([]byte{'1'}, 100000)...), "end of input"},
		{"protocol 6", []byte{0x80, 6, 'N', '.'}, "protocol 6"},
		{"shared tuples", doubling, ""},
		{"shared tuple key", sharedKey, ""},
		{"list in a tuple key", []byte{'}', ']', 0x85, 'K', 1, 's', '.'}, "unhashable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(c.in))
			if c.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.msg)
			}
		})
	}
}

func TestContainerLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []byte
		msg  string
	}{
		{"list", []byte{']', '(', 'N', 'N', 'N', 'N', 'e', '.'}, "list longer than 3"},
		{"appends", []byte{']', 'N', 'a', 'N', 'a', 'N', 'a', 'N', 'a', '.'}, "list longer than 3"},
		{"dict", []byte{'}', '(', 'K', 1, 'N', 'K', 2, 'N', 'K', 3, 'N', 'K', 4, 'N', 'u', '.'}, "dict longer than 3"},
	} {
		d := &decoder{r: bufio.NewReader(bytes.NewReader(c.in)), items: 3}
		if _, err := d.run(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.msg)
		}
		// Within the limit of the decoder users get, the same input decodes.
		if _, err := Decode(bytes.NewReader(c.in)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestDecodedMemoryBudget checks that values made from few input bytes
// (empty containers, one opcode each) are refused once their estimated
// memory passes the budget, that references to values decoded before cost
// a slot only, and that an input within the budget decodes.
func TestDecodedMemoryBudget(t *testing.T) {
	floor, cap := decodedFloor, decodedCap
	defer func() { decodedFloor, decodedCap = floor, cap }()
	decodedFloor, decodedCap = 64<<10, 1<<20

	// A list of 100,000 empty dicts: 100 KB of input, about 10 MB decoded.
	bomb := append([]byte{0x80, 4, ']', '('}, bytes.Repeat([]byte{'}'}, 100000)...)
	bomb = append(bomb, 'e', '.')
	_, err := Decode(bytes.NewReader(bomb))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("empty-dict bomb: %v, want the memory budget's refusal", err)
	}
	// The cap holds whatever the input's size: 2 MB of strings of 20
	// bytes each would be 3.6 MB decoded, over the 1 MiB cap.
	str := []byte{0x80, 4, ']', '('}
	for i := 0; i < 100000; i++ {
		str = append(str, 0x8c, 18)
		str = append(str, bytes.Repeat([]byte{'s'}, 18)...)
	}
	str = append(str, 'e', '.')
	if _, err := Decode(bytes.NewReader(str)); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "more than 1048576") {
		t.Fatalf("strings over the cap: %v, want the cap's refusal", err)
	}
	// One string remembered and referred to 20,000 times: slots only.
	refs := []byte{0x80, 4, ']', 0x8c, 100}
	refs = append(refs, bytes.Repeat([]byte{'r'}, 100)...)
	refs = append(refs, 0x94, '0', '(')
	for i := 0; i < 20000; i++ {
		refs = append(refs, 'h', 0)
	}
	refs = append(refs, 'e', '.')
	v, err := Decode(bytes.NewReader(refs))
	if err != nil {
		t.Fatalf("memo references: %v", err)
	}
	if l, ok := v.([]any); !ok || len(l) != 20000 {
		t.Fatalf("memo references decoded to %T of %d", v, len(v.([]any)))
	}
}

func ExampleDecode() {
	// pickle.dumps({"action": "alloc", "size": 512}, protocol=4)
	raw := []byte("\x80\x04\x95\x20\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x04size\x94M\x00\x02u.")
	v, err := Decode(bytes.NewReader(raw))
	if err != nil {
		fmt.Println(err)
		return
	}
	d := v.(*Dict)
	action, _ := d.Get("action")
	size, _ := d.Get("size")
	fmt.Println(action, size)
	// Output: alloc 512
}

func TestReaderFailure(t *testing.T) {
	cause := errors.New("disk on fire")
	_, err := Decode(io.MultiReader(bytes.NewReader([]byte{0x80, 4, '}', 0x8c, 10, 'a'}), iotest.ErrReader(cause)))
	if !errors.Is(err, cause) || errors.Is(err, ErrMalformed) {
		t.Fatalf("a failing reader gave %v: want its error, not ErrMalformed", err)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Offset != 5 {
		t.Fatalf("%#v: want an *Error at offset 5, where the value begins", err)
	}
}

func TestDictKeys(t *testing.T) {
	for _, n := range []int{3, smallDict, smallDict + 5, 100} {
		// {0: 0, 1: 1, ..., n-1: n-1}, then every key set again to -1 and
		// a tuple key (1, 2) added.
		in := []byte{'}'}
		for i := 0; i < n; i++ {
			in = append(in, 'K', byte(i), 'K', byte(i), 's')
		}
		for i := 0; i < n; i++ {
			in = append(in, 'K', byte(i), 'J', 0xff, 0xff, 0xff, 0xff, 's')
		}
		in = append(in, 'K', 1, 'K', 2, 0x86, 'N', 's', '.')
		v, err := Decode(bytes.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		d := v.(*Dict)
		if d.Len() != n+1 {
			t.Errorf("n=%d: %d keys", n, d.Len())
		}
		for i := 0; i < n; i++ {
			if got, ok := d.Get(int64(i)); !ok || got != int64(-1) {
				t.Errorf("n=%d: Get(%d) = %v, %v", n, i, got, ok)
			}
		}
		if _, ok := d.Get(int64(n)); ok {
			t.Errorf("n=%d: Get of a missing key found it", n)
		}
		if _, ok := d.Get(Tuple{int64(1), int64(2)}); ok {
			t.Errorf("n=%d: Get of a tuple key (not looked up) found it", n)
		}
	}
}

func TestMemoKeys(t *testing.T) {
	// BINPUT 7 and LONG_BINPUT 4e9 (beyond the input: kept aside), then
	// both fetched into a tuple.
	in := []byte{'K', 1, 'q', 7, 'K', 2, 'r', 0x00, 0x28, 0x6b, 0xee, 'h', 7, 'j', 0x00, 0x28, 0x6b, 0xee, 0x86, '.'}
	v, err := Decode(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if tu, ok := v.(Tuple); !ok || len(tu) != 2 || tu[0] != int64(1) || tu[1] != int64(2) {
		t.Fatalf("got %v", v)
	}
	if _, err := Decode(bytes.NewReader([]byte{'K', 1, 'q', 7, 'h', 6, '.'})); err == nil || !strings.Contains(err.Error(), "memo key 6") {
		t.Fatalf("a gap in the memo: %v", err)
	}
}
