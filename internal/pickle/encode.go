package pickle

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"unicode/utf8"
)

// ErrUnsupported is matched by every encoding error caused by the value
// (as opposed to the writer): a type outside the subset, a string that is
// not UTF-8, a cycle, or a value over the limits.
var ErrUnsupported = errors.New("pickle: value outside the plain-data subset")

// Opcodes written by Encode and read by Decode (package doc).
const (
	opProto          = 0x80
	opStop           = '.'
	opMark           = '('
	opNone           = 'N'
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opBinInt         = 'J'
	opLong1          = 0x8a
	opLong4          = 0x8b
	opBinFloat       = 'G'
	opShortUnicode   = 0x8c
	opBinUnicode     = 'X'
	opShortBinBytes  = 'C'
	opBinBytes       = 'B'
	opEmptyList      = ']'
	opEmptyDict      = '}'
	opEmptyTuple     = ')'
	opTuple          = 't'
	opTuple1         = 0x85
	opAppends        = 'e'
	opSetItems       = 'u'
	encodeProtocol   = 4
	batchSize        = 1000 // entries per APPENDS or SETITEMS, as Python's pickler
	maxEncodedValues = MaxItems
)

// Encode writes v as one pickle (protocol 4) to w. The value may hold nil,
// bool, any integer type, *big.Int, float32, float64, string (valid UTF-8),
// []byte, []any, []string, []int64, Tuple, *Dict (or Dict) and
// map[string]any (written with its keys sorted); anything else, a cycle,
// nesting deeper than MaxDepth, a string or bytes longer than MaxLen, a
// container of more than MaxItems entries or more than MaxItems values in
// all is an error matching ErrUnsupported. Shared values are written once
// per reference (there is no memo). A write error is returned wrapped.
func Encode(w io.Writer, v any) error { return encode(w, v, maxEncodedValues) }

// encode is Encode with a budget of values (tests lower it).
func encode(w io.Writer, v any, budget int) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	e := &encoder{w: bw, budget: budget, open: map[any]bool{}}
	bw.Write([]byte{opProto, encodeProtocol})
	if err := e.value(v, 0); err != nil {
		return err
	}
	bw.WriteByte(opStop)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("pickle: write: %w", err)
	}
	return nil
}

type encoder struct {
	w       *bufio.Writer
	budget  int          // values still allowed
	open    map[any]bool // containers being written, to refuse cycles
	scratch [9]byte
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("pickle: encode: %s: %w", fmt.Sprintf(format, args...), ErrUnsupported)
}

func (e *encoder) value(v any, depth int) error {
	if depth > MaxDepth {
		return unsupported("containers nested more than %d deep", MaxDepth)
	}
	if e.budget--; e.budget < 0 {
		return unsupported("too many values (at most %d)", maxEncodedValues)
	}
	switch x := v.(type) {
	case nil:
		e.w.WriteByte(opNone)
	case bool:
		if x {
			e.w.WriteByte(opNewTrue)
		} else {
			e.w.WriteByte(opNewFalse)
		}
	case int:
		e.int(int64(x))
	case int8:
		e.int(int64(x))
	case int16:
		e.int(int64(x))
	case int32:
		e.int(int64(x))
	case int64:
		e.int(x)
	case uint:
		e.uint(uint64(x))
	case uint8:
		e.int(int64(x))
	case uint16:
		e.int(int64(x))
	case uint32:
		e.int(int64(x))
	case uint64:
		e.uint(x)
	case uintptr:
		e.uint(uint64(x))
	case *big.Int:
		if x == nil {
			return unsupported("nil *big.Int")
		}
		return e.big(x)
	case float32:
		e.float(float64(x))
	case float64:
		e.float(x)
	case string:
		return e.string(x)
	case []byte:
		return e.bytes(x)
	case []string:
		return e.list(len(x), depth, nil, func(i int) any { return x[i] })
	case []int64:
		return e.list(len(x), depth, nil, func(i int) any { return x[i] })
	case []any:
		var id any
		if len(x) > 0 {
			id = &x[0]
		}
		return e.list(len(x), depth, id, func(i int) any { return x[i] })
	case Tuple:
		return e.tuple(x, depth)
	case Dict:
		return e.dict(&x, depth)
	case *Dict:
		if x == nil {
			e.w.WriteByte(opNone)
			return nil
		}
		return e.dict(x, depth)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := &Dict{Keys: make([]any, len(keys)), Values: make([]any, len(keys))}
		for i, k := range keys {
			d.Keys[i], d.Values[i] = k, x[k]
		}
		return e.dict(d, depth)
	default:
		return unsupported("type %T", v)
	}
	return nil
}

func (e *encoder) int(v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		e.w.Write([]byte{opBinInt1, byte(v)})
	case v >= 0 && v < 1<<16:
		e.w.Write([]byte{opBinInt2, byte(v), byte(v >> 8)})
	case v >= math.MinInt32 && v <= math.MaxInt32:
		e.scratch[0] = opBinInt
		binary.LittleEndian.PutUint32(e.scratch[1:], uint32(int32(v)))
		e.w.Write(e.scratch[:5])
	default:
		e.big(big.NewInt(v))
	}
}

func (e *encoder) uint(v uint64) {
	if v <= math.MaxInt64 {
		e.int(int64(v))
		return
	}
	e.big(new(big.Int).SetUint64(v))
}

// big writes LONG1 (or LONG4): little-endian two's complement, as short as
// the sign allows.
func (e *encoder) big(x *big.Int) error {
	var b []byte
	if x.Sign() >= 0 {
		b = x.Bytes() // big-endian magnitude
		if len(b) > 0 && b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// -x - 1 in bytes, inverted, is x in two's complement.
		m := new(big.Int).Neg(x)
		m.Sub(m, big.NewInt(1))
		b = m.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		for i := range b {
			b[i] = ^b[i]
		}
	}
	slices.Reverse(b)
	if len(b) > 4096 {
		return unsupported("integer of %d bytes", len(b))
	}
	if len(b) < 256 {
		e.w.Write([]byte{opLong1, byte(len(b))})
	} else {
		e.scratch[0] = opLong4
		binary.LittleEndian.PutUint32(e.scratch[1:], uint32(len(b)))
		e.w.Write(e.scratch[:5])
	}
	e.w.Write(b)
	return nil
}

func (e *encoder) float(f float64) {
	e.scratch[0] = opBinFloat
	binary.BigEndian.PutUint64(e.scratch[1:], math.Float64bits(f))
	e.w.Write(e.scratch[:9])
}

// lengthPrefix writes a short opcode with a 1-byte length or a long one
// with a 4-byte length.
func (e *encoder) lengthPrefix(short, long byte, n int) error {
	if n > MaxLen {
		return unsupported("length %d over the limit of %d", n, MaxLen)
	}
	if n < 256 {
		e.w.Write([]byte{short, byte(n)})
		return nil
	}
	e.scratch[0] = long
	binary.LittleEndian.PutUint32(e.scratch[1:], uint32(n))
	e.w.Write(e.scratch[:5])
	return nil
}

func (e *encoder) string(s string) error {
	if !utf8.ValidString(s) {
		return unsupported("string %.20q is not UTF-8", s)
	}
	if err := e.lengthPrefix(opShortUnicode, opBinUnicode, len(s)); err != nil {
		return err
	}
	e.w.WriteString(s)
	return nil
}

func (e *encoder) bytes(b []byte) error {
	if err := e.lengthPrefix(opShortBinBytes, opBinBytes, len(b)); err != nil {
		return err
	}
	e.w.Write(b)
	return nil
}

// enter marks a container (by identity) open, refusing a cycle.
func (e *encoder) enter(id any) error {
	if id == nil {
		return nil
	}
	if e.open[id] {
		return unsupported("a container contains itself")
	}
	e.open[id] = true
	return nil
}

func (e *encoder) list(n, depth int, id any, at func(int) any) error {
	if n > MaxItems {
		return unsupported("list of %d entries (at most %d)", n, MaxItems)
	}
	if err := e.enter(id); err != nil {
		return err
	}
	e.w.WriteByte(opEmptyList)
	for start := 0; start < n; start += batchSize {
		e.w.WriteByte(opMark)
		for i := start; i < min(n, start+batchSize); i++ {
			if err := e.value(at(i), depth+1); err != nil {
				return err
			}
		}
		e.w.WriteByte(opAppends)
	}
	delete(e.open, id)
	return nil
}

func (e *encoder) tuple(t Tuple, depth int) error {
	if len(t) > MaxItems {
		return unsupported("tuple of %d entries (at most %d)", len(t), MaxItems)
	}
	if len(t) == 0 {
		e.w.WriteByte(opEmptyTuple)
		return nil
	}
	id := &t[0]
	if err := e.enter(id); err != nil {
		return err
	}
	if len(t) > 3 {
		e.w.WriteByte(opMark)
	}
	for _, x := range t {
		if err := e.value(x, depth+1); err != nil {
			return err
		}
	}
	if len(t) > 3 {
		e.w.WriteByte(opTuple)
	} else {
		e.w.WriteByte(byte(opTuple1 + len(t) - 1))
	}
	delete(e.open, id)
	return nil
}

func (e *encoder) dict(d *Dict, depth int) error {
	if len(d.Keys) != len(d.Values) {
		return unsupported("dict of %d keys and %d values", len(d.Keys), len(d.Values))
	}
	if len(d.Keys) > MaxItems {
		return unsupported("dict of %d entries (at most %d)", len(d.Keys), MaxItems)
	}
	if err := e.enter(d); err != nil {
		return err
	}
	e.w.WriteByte(opEmptyDict)
	n := len(d.Keys)
	for start := 0; start < n; start += batchSize {
		e.w.WriteByte(opMark)
		for i := start; i < min(n, start+batchSize); i++ {
			if !hashableKey(d.Keys[i], 0) {
				return unsupported("dict key of type %T (Python cannot hash it)", d.Keys[i])
			}
			if err := e.value(d.Keys[i], depth+1); err != nil {
				return err
			}
			if err := e.value(d.Values[i], depth+1); err != nil {
				return err
			}
		}
		e.w.WriteByte(opSetItems)
	}
	delete(e.open, d)
	return nil
}

// hashableKey reports whether Python can hash k: a scalar, bytes, or a
// tuple of hashable values.
func hashableKey(k any, depth int) bool {
	switch x := k.(type) {
	case []any, []string, []int64, *Dict, Dict, map[string]any:
		return false
	case Tuple:
		if depth > MaxDepth {
			return false
		}
		for _, v := range x {
			if !hashableKey(v, depth+1) {
				return false
			}
		}
	}
	return true
}

// Marshal returns the pickle Encode writes for v.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := Encode(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
