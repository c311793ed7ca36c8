// Package pickle reads and writes the data subset of Python's pickle format:
// the dicts, lists, tuples, strings, bytes, numbers, booleans and None that
// pickle.dump writes for plain data. It never imports modules, calls
// functions or builds objects.
//
// # The subset
//
// Decode reads protocols 2 to 5, and the text opcodes of protocol 0 where
// they are cheap: PROTO, FRAME, STOP, MARK, POP, POP_MARK, DUP, NONE,
// NEWTRUE, NEWFALSE, BININT1, BININT2, BININT, LONG1, LONG4, INT, LONG,
// FLOAT, BINFLOAT, UNICODE, SHORT_BINUNICODE, BINUNICODE, BINUNICODE8,
// SHORT_BINBYTES, BINBYTES, BINBYTES8, EMPTY_LIST, EMPTY_DICT, EMPTY_TUPLE,
// LIST, TUPLE, DICT, TUPLE1, TUPLE2, TUPLE3, APPEND, APPENDS, SETITEM,
// SETITEMS, MEMOIZE, PUT, BINPUT, LONG_BINPUT, GET, BINGET, LONG_BINGET. An
// opcode that would run code (GLOBAL, REDUCE, BUILD, NEWOBJ and the like) is
// an error naming it and its offset.
//
// Encode writes protocol 4 with a subset of those opcodes (PROTO, STOP,
// MARK, NONE, NEWTRUE, NEWFALSE, BININT1, BININT2, BININT, LONG1, LONG4,
// BINFLOAT, SHORT_BINUNICODE, BINUNICODE, SHORT_BINBYTES, BINBYTES,
// EMPTY_LIST, EMPTY_DICT, EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3, TUPLE,
// APPENDS, SETITEMS), without frames or a memo, so that what it writes
// Decode reads back, and so does Python's pickle.load. Both sides keep the
// same limits (MaxDepth, MaxLen, MaxItems): Encode refuses a value that
// Decode would refuse.
//
// # Values
//
// Values decode to Go values: None to nil, bool, int64 (or *big.Int for
// integers beyond 64 bits), float64, string (str), []byte (bytes), []any
// (list), Tuple (tuple) and *Dict (dict, keys in insertion order). Encode
// takes those, and also the other integer types, float32, []string, []int64,
// map[string]any (keys sorted) and *Dict built with Set.
package pickle

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Limits bound what a hostile input can make the decoder hold.
const (
	MaxDepth = 1000     // containers nested within each other, and marks
	MaxLen   = 64 << 20 // bytes of one string or bytes value
	MaxItems = 1 << 26  // entries of one list or dict
	MaxLong  = 2048     // bytes of one LONG4 integer (16,384 bits)
	// MaxDecoded bounds the Go memory the decoded values may take, as the
	// decoder estimates it (a string its bytes and a header, a container
	// its header and a slot per entry, a reference to a value already
	// decoded a slot): at most DecodedPerByte bytes for each input byte
	// read, plus DecodedFloor, and never more than MaxDecoded. A pickle
	// of real data decodes to a few times its size; one made of one-byte
	// opcodes that each make an empty container would make a hundred
	// times its size (gigabytes from a small compressed file) and is
	// refused instead.
	MaxDecoded     = 8 << 30
	DecodedPerByte = 24
	DecodedFloor   = 256 << 20
)

// ErrMalformed is matched by every decoding error.
var ErrMalformed = errors.New("pickle: malformed or unsupported input")

// Error is a decoding error at a byte offset of the input.
type Error struct {
	Offset int64
	Msg    string
	Err    error // the reader's error, when reading failed; nil for malformed input
}

// Error formats the error with its offset.
func (e *Error) Error() string {
	if e.Offset < 0 {
		return "pickle: " + e.Msg
	}
	return fmt.Sprintf("pickle: at byte %d: %s", e.Offset, e.Msg)
}

// Unwrap returns the reader's error when reading failed, else ErrMalformed:
// input that ends early or breaks the format matches ErrMalformed, a failing
// reader matches its own error.
func (e *Error) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return ErrMalformed
}

type decoder struct {
	r     *bufio.Reader
	off   int64
	stack []any
	marks []int
	memo  memo
	items int           // the limit on one container's entries: MaxItems
	spent int64         // the estimated bytes of the values decoded (MaxDecoded)
	keys  map[*any]bool // tuples already checked as dict keys
}

// Decode reads one pickle from r, up to and including its STOP opcode.
func Decode(r io.Reader) (any, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 64<<10), items: MaxItems}
	return d.run()
}

// readFail reports a read error: the end of input as malformed (the pickle
// is truncated), any other error as itself.
func (d *decoder) readFail(err error, what string) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return d.fail(d.off, "unexpected end of input%s", what)
	}
	return &Error{Offset: d.off, Msg: "read: " + err.Error(), Err: err}
}

func (d *decoder) fail(op int64, format string, args ...any) error {
	return &Error{Offset: op, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) byte1() (byte, error) {
	c, err := d.r.ReadByte()
	if err != nil {
		return 0, d.readFail(err, "")
	}
	d.off++
	return c, nil
}

func (d *decoder) bytesN(n uint64) ([]byte, error) {
	if n > MaxLen {
		return nil, d.fail(d.off, "length %d over the limit of %d", n, MaxLen)
	}
	b := make([]byte, 0, min(n, 1<<16))
	for uint64(len(b)) < n {
		chunk := min(n-uint64(len(b)), 1<<16)
		start := len(b)
		b = append(b, make([]byte, chunk)...)
		if _, err := io.ReadFull(d.r, b[start:]); err != nil {
			return nil, d.readFail(err, fmt.Sprintf(" in a %d-byte value", n))
		}
		d.off += int64(chunk)
	}
	return b, nil
}

func (d *decoder) uint(n int) (uint64, error) {
	b, err := d.bytesN(uint64(n))
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

func (d *decoder) line() (string, error) {
	var b []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		b = append(b, chunk...)
		d.off += int64(len(chunk))
		if len(b) > MaxLen {
			return "", d.fail(d.off, "text argument over the limit of %d bytes", MaxLen)
		}
		if err == nil {
			return string(b[:len(b)-1]), nil
		}
		if err != bufio.ErrBufferFull {
			return "", d.readFail(err, " in a text argument")
		}
	}
}

func (d *decoder) pop(op int64) (any, error) {
	if len(d.stack) == 0 || (len(d.marks) > 0 && len(d.stack) <= d.marks[len(d.marks)-1]) {
		return nil, d.fail(op, "stack underflow")
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

func (d *decoder) top(op int64) (any, error) {
	if len(d.stack) == 0 {
		return nil, d.fail(op, "stack underflow")
	}
	return d.stack[len(d.stack)-1], nil
}

// popMark returns the values pushed since the last MARK and removes them.
func (d *decoder) popMark(op int64) ([]any, error) {
	items, err := d.popMarkView(op)
	return append([]any(nil), items...), err
}

// popMarkView is popMark without the copy: the values stay valid until the
// next push.
func (d *decoder) popMarkView(op int64) ([]any, error) {
	if len(d.marks) == 0 {
		return nil, d.fail(op, "no MARK to pop to")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[m:]
	d.stack = d.stack[:m]
	return items, nil
}

func (d *decoder) putMemo(op int64, k uint64) error {
	v, err := d.top(op)
	if err != nil {
		return err
	}
	if uint64(d.memo.n) > uint64(d.off) { // at most one entry per input byte
		return d.fail(op, "memo larger than the input")
	}
	d.memo.put(k, v, d.off)
	return nil
}

// memo holds the values PUT and MEMOIZE saved: keys up to the input offset
// in a slice (MEMOIZE numbers them 0, 1, 2, ...), others in a map, so its
// size is bounded by the input either way.
type memo struct {
	dense  []any
	sparse map[uint64]any
	n      int // keys set
}

type unsetT struct{}

func (m *memo) put(k uint64, v any, off int64) {
	if k < uint64(len(m.dense)) {
		if _, unset := m.dense[k].(unsetT); unset {
			m.n++
		}
		m.dense[k] = v
		return
	}
	if k <= uint64(off) && m.sparse == nil {
		for uint64(len(m.dense)) < k {
			m.dense = append(m.dense, unsetT{})
		}
		m.dense = append(m.dense, v)
		m.n++
		return
	}
	if m.sparse == nil {
		m.sparse = make(map[uint64]any)
	}
	if _, ok := m.sparse[k]; !ok {
		m.n++
	}
	m.sparse[k] = v
}

func (m *memo) get(k uint64) (any, bool) {
	if k < uint64(len(m.dense)) {
		v := m.dense[k]
		_, unset := v.(unsetT)
		return v, !unset
	}
	v, ok := m.sparse[k]
	return v, ok
}

func (d *decoder) getMemo(op int64, k uint64) error {
	v, ok := d.memo.get(k)
	if !ok {
		return d.fail(op, "memo key %d not set", k)
	}
	return d.pushRef(v)
}

func (d *decoder) pushString(op int64, n uint64) error {
	b, err := d.bytesN(n)
	if err != nil {
		return err
	}
	return d.push(string(b))
}

func (d *decoder) pushBytes(op int64, n uint64) error {
	b, err := d.bytesN(n)
	if err != nil {
		return err
	}
	return d.push(b)
}

// long decodes a little-endian two's-complement integer.
func long(b []byte) any {
	if len(b) <= 8 {
		var u uint64
		for i := len(b) - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		shift := 64 - 8*len(b)
		return int64(u<<shift) >> shift
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	v := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if v.IsInt64() {
		return v.Int64()
	}
	return v
}

func (d *decoder) appendTo(op int64, items []any) error {
	t, err := d.top(op)
	if err != nil {
		return err
	}
	l, ok := t.(*list)
	if !ok {
		return d.fail(op, "APPEND to a %s", typeName(t))
	}
	if len(l.v)+len(items) > d.items {
		return d.fail(op, "list longer than %d items", d.items)
	}
	l.v = append(l.v, items...)
	return nil
}

func (d *decoder) setItems(op int64, items []any) error {
	if len(items)%2 != 0 {
		return d.fail(op, "SETITEMS with an odd number of values")
	}
	t, err := d.top(op)
	if err != nil {
		return err
	}
	m, ok := t.(*Dict)
	if !ok {
		return d.fail(op, "SETITEM on a %s", typeName(t))
	}
	if n := len(items) / 2; n > 1 && m.Len() == 0 && n <= d.items {
		m.Keys = make([]any, 0, n)
		m.Values = make([]any, 0, n)
	}
	for i := 0; i < len(items); i += 2 {
		k := items[i]
		if err := d.hashable(k, 0); err != nil {
			return d.fail(op, "%v", err)
		}
		if m.Len() >= d.items {
			return d.fail(op, "dict longer than %d items", d.items)
		}
		if err := m.set(k, items[i+1]); err != nil {
			return d.fail(op, "%v", err)
		}
	}
	return nil
}

// hashable checks that k can be a dict key as in Python: a scalar, or a
// tuple of hashable values. Each tuple is checked once per decode, so a
// shared key tuple used many times costs its size once.
func (d *decoder) hashable(k any, depth int) error {
	switch x := k.(type) {
	case nil, bool, int64, float64, string, []byte, *big.Int:
		return nil
	case Tuple:
		if len(x) == 0 || d.keys[&x[0]] {
			return nil
		}
		if depth > MaxDepth {
			return fmt.Errorf("dict key nested more than %d deep", MaxDepth)
		}
		for _, e := range x {
			if err := d.hashable(e, depth+1); err != nil {
				return err
			}
		}
		if d.keys == nil {
			d.keys = make(map[*any]bool)
		}
		d.keys[&x[0]] = true
		return nil
	}
	return fmt.Errorf("unhashable dict key of type %s", typeName(k))
}

// list is a list under construction: APPEND must grow the same list that
// the memo may already refer to.
type list struct{ v []any }

func typeName(v any) string {
	switch v.(type) {
	case *list:
		return "list"
	case *Dict:
		return "dict"
	case Tuple:
		return "tuple"
	}
	return fmt.Sprintf("%T", v)
}

// finisher replaces lists under construction by their slices. Each
// container is visited once however often it is shared, so shared
// references cannot make the walk exponential; nesting deeper than MaxDepth
// is an error.
type finisher struct {
	lists  map[*list]bool
	dicts  map[*Dict]bool
	tuples map[*any]bool
	err    error
}

func finish(v any) (any, error) {
	f := &finisher{lists: map[*list]bool{}, dicts: map[*Dict]bool{}, tuples: map[*any]bool{}}
	v = f.walk(v, 0)
	return v, f.err
}

func (f *finisher) walk(v any, depth int) any {
	if depth > MaxDepth {
		if f.err == nil {
			f.err = &Error{Offset: -1, Msg: fmt.Sprintf("containers nested more than %d deep", MaxDepth)}
		}
		return nil
	}
	switch x := v.(type) {
	case *list:
		if !f.lists[x] {
			f.lists[x] = true
			for i := range x.v {
				x.v[i] = f.walk(x.v[i], depth+1)
			}
		}
		return x.v
	case *Dict:
		if !f.dicts[x] {
			f.dicts[x] = true
			for i := range x.Values {
				x.Values[i] = f.walk(x.Values[i], depth+1)
			}
		}
		return x
	case Tuple:
		if len(x) > 0 && !f.tuples[&x[0]] {
			f.tuples[&x[0]] = true
			for i := range x {
				x[i] = f.walk(x[i], depth+1)
			}
		}
		return x
	}
	return v
}

func (d *decoder) run() (any, error) {
	for {
		op := d.off
		c, err := d.byte1()
		if err != nil {
			return nil, err
		}
		switch c {
		case opProto:
			v, err := d.byte1()
			if err != nil {
				return nil, err
			}
			if v > 5 {
				return nil, d.fail(op, "protocol %d is not supported (at most 5)", v)
			}
		case 0x95: // FRAME
			if _, err := d.uint(8); err != nil {
				return nil, err
			}
		case opStop:
			v, err := d.pop(op)
			if err != nil {
				return nil, err
			}
			return finish(v)
		case opMark:
			if len(d.marks) >= MaxDepth {
				return nil, d.fail(op, "more than %d open MARKs", MaxDepth)
			}
			d.marks = append(d.marks, len(d.stack))
		case '0': // POP
			if _, err := d.pop(op); err != nil {
				return nil, err
			}
		case '1': // POP_MARK
			if _, err := d.popMarkView(op); err != nil {
				return nil, err
			}
		case '2': // DUP
			v, err := d.top(op)
			if err != nil {
				return nil, err
			}
			err = d.pushRef(v)
			if err != nil {
				return nil, err
			}
		case opNone:
			err = d.push(nil)
		case opNewTrue:
			err = d.push(true)
		case opNewFalse:
			err = d.push(false)
		case opBinInt1:
			var v uint64
			if v, err = d.uint(1); err == nil {
				err = d.push(int64(v))
			}
		case opBinInt2:
			var v uint64
			if v, err = d.uint(2); err == nil {
				err = d.push(int64(v))
			}
		case opBinInt:
			var v uint64
			if v, err = d.uint(4); err == nil {
				err = d.push(int64(int32(uint32(v))))
			}
		case opLong1:
			var n uint64
			if n, err = d.uint(1); err == nil {
				var b []byte
				if b, err = d.bytesN(n); err == nil {
					err = d.push(long(b))
				}
			}
		case opLong4:
			var n uint64
			if n, err = d.uint(4); err == nil {
				if int32(uint32(n)) < 0 {
					return nil, d.fail(op, "negative LONG4 length")
				}
				if n > MaxLong {
					return nil, d.fail(op, "LONG4 of %d bytes (at most %d)", n, MaxLong)
				}
				var b []byte
				if b, err = d.bytesN(n); err == nil {
					err = d.push(long(b))
				}
			}
		case opBinFloat:
			var b []byte
			if b, err = d.bytesN(8); err == nil {
				err = d.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
			}
		case 'V': // UNICODE (raw-unicode-escape text)
			var s string
			if s, err = d.line(); err == nil {
				if s, err = rawUnicode(s); err == nil {
					err = d.push(s)
				}
			}
		case 'I', 'L', 'F': // INT, LONG, FLOAT (text)
			var s string
			if s, err = d.line(); err == nil {
				err = d.textNumber(op, c, s)
			}
		case 0x8c, 'X', 0x8d, 'C', 'B', 0x8e: // (SHORT_)BINUNICODE(8), (SHORT_)BINBYTES(8)
			v := lengthPrefixed[c]
			var n uint64
			if n, err = d.uint(v.width); err == nil {
				if v.bytes {
					err = d.pushBytes(op, n)
				} else {
					err = d.pushString(op, n)
				}
			}
		case opEmptyList:
			err = d.push(&list{})
		case opEmptyDict:
			err = d.push(&Dict{})
		case opEmptyTuple:
			err = d.push(Tuple{})
		case 'l', 't', 'd': // LIST, TUPLE, DICT from a MARK
			var items []any
			if items, err = d.popMark(op); err != nil {
				return nil, err
			}
			switch c {
			case 'l':
				err = d.push(&list{v: items})
			case 't':
				err = d.push(Tuple(items))
			default:
				m := &Dict{}
				err = d.push(m)
				if err == nil {
					err = d.setItems(op, items)
				}
			}
		case 0x85, 0x86, 0x87: // TUPLE1..3
			n := int(c - 0x84)
			if len(d.stack) < n || (len(d.marks) > 0 && len(d.stack)-n < d.marks[len(d.marks)-1]) {
				return nil, d.fail(op, "stack underflow")
			}
			t := Tuple(append([]any(nil), d.stack[len(d.stack)-n:]...))
			d.stack = d.stack[:len(d.stack)-n]
			err = d.push(t)
		case 'a': // APPEND
			var v any
			if v, err = d.pop(op); err == nil {
				err = d.appendTo(op, []any{v})
			}
		case opAppends:
			var items []any
			if items, err = d.popMarkView(op); err == nil {
				err = d.appendTo(op, items)
			}
		case 's': // SETITEM
			var k, v any
			if v, err = d.pop(op); err == nil {
				if k, err = d.pop(op); err == nil {
					err = d.setItems(op, []any{k, v})
				}
			}
		case opSetItems:
			var items []any
			if items, err = d.popMarkView(op); err == nil {
				err = d.setItems(op, items)
			}
		case 0x94: // MEMOIZE
			err = d.putMemo(op, uint64(d.memo.n))
		case 'q': // BINPUT
			var k uint64
			if k, err = d.uint(1); err == nil {
				err = d.putMemo(op, k)
			}
		case 'r': // LONG_BINPUT
			var k uint64
			if k, err = d.uint(4); err == nil {
				err = d.putMemo(op, k)
			}
		case 'p': // PUT
			var s string
			if s, err = d.line(); err == nil {
				var k uint64
				if k, err = strconv.ParseUint(s, 10, 64); err != nil {
					return nil, d.fail(op, "bad PUT key %q", s)
				}
				err = d.putMemo(op, k)
			}
		case 'h': // BINGET
			var k uint64
			if k, err = d.uint(1); err == nil {
				err = d.getMemo(op, k)
			}
		case 'j': // LONG_BINGET
			var k uint64
			if k, err = d.uint(4); err == nil {
				err = d.getMemo(op, k)
			}
		case 'g': // GET
			var s string
			if s, err = d.line(); err == nil {
				var k uint64
				if k, err = strconv.ParseUint(s, 10, 64); err != nil {
					return nil, d.fail(op, "bad GET key %q", s)
				}
				err = d.getMemo(op, k)
			}
		default:
			return nil, d.fail(op, "opcode %s is not supported (only plain data is decoded)", opName(c))
		}
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				return nil, err
			}
			return nil, d.fail(op, "%v", err)
		}
	}
}

func (d *decoder) textNumber(op int64, c byte, s string) error {
	switch c {
	case 'F':
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return d.fail(op, "bad FLOAT %q", s)
		}
		return d.push(f)
	case 'I':
		switch s {
		case "00":
			return d.push(false)
		case "01":
			return d.push(true)
		}
	}
	s = strings.TrimSuffix(s, "L")
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return d.push(v)
	}
	if len(s) > 4096 {
		return d.fail(op, "integer of %d digits (at most 4096)", len(s))
	}
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return d.fail(op, "bad integer %q", s)
	}
	return d.push(v)
}

// rawUnicode decodes Python's raw-unicode-escape: \\uXXXX and \\UXXXXXXXX
// escapes, every other byte a Latin-1 character.
func rawUnicode(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') {
			n := 4
			if s[i+1] == 'U' {
				n = 8
			}
			if i+2+n <= len(s) {
				if r, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32); err == nil && r <= 0x10FFFF {
					b.WriteRune(rune(r))
					i += 1 + n
					continue
				}
			}
		}
		b.WriteRune(rune(s[i]))
	}
	return b.String(), nil
}

// lengthPrefixed are the opcodes of a string or bytes value: the width of
// their little-endian length, and whether the value is bytes (else str).
var lengthPrefixed = map[byte]struct {
	width int
	bytes bool
}{
	0x8c: {1, false}, 'X': {4, false}, 0x8d: {8, false},
	'C': {1, true}, 'B': {4, true}, 0x8e: {8, true},
}

func opName(c byte) string {
	names := map[byte]string{
		'c': "GLOBAL", 0x93: "STACK_GLOBAL", 'R': "REDUCE", 'b': "BUILD", 'i': "INST", 'o': "OBJ",
		0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", 'P': "PERSID", 'Q': "BINPERSID", 0x82: "EXT1", 0x83: "EXT2",
		0x84: "EXT4", 0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x96: "BYTEARRAY8",
		0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER", 'S': "STRING", 'T': "BINSTRING", 'U': "SHORT_BINSTRING",
	}
	if n, ok := names[c]; ok {
		return fmt.Sprintf("%s (%#02x)", n, c)
	}
	return fmt.Sprintf("%#02x", c)
}
