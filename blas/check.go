package blas

import (
	"math"

	"github.com/gpumem/gpumem"
)

// The checks every call passes before it reaches an engine: the libraries
// take int dimensions and would read out of bounds, or fault, on a shape
// that does not hold together; Go can tell, so such a call is an error
// matching gpumem.ErrInvalidValue and nothing is called.

// maxInt32 is the largest dimension, leading dimension, increment and batch
// count: the libraries take int.
const maxInt32 = math.MaxInt32

// maxBytes bounds the bytes one operand may span.
const maxBytes = 1 << 62

func (c *call) check() error {
	r := c.routine
	if c.t != F32 && c.t != F64 && (c.kind != kGemmEx || (c.t != F16 && c.t != BF16)) {
		return invalid(r, "element type %v", c.t)
	}
	if c.mode != Host && c.mode != Device {
		return invalid(r, "pointer mode %v", c.mode)
	}
	switch c.kind {
	case kAxpy, kDot:
		if err := dim(r, "n", c.n); err != nil {
			return err
		}
		if err := vector(r, "x", c.n, c.x, c.incx, c.t, false); err != nil {
			return err
		}
		if err := vector(r, "y", c.n, c.y, c.incy, c.t, false); err != nil {
			return err
		}
		if c.kind == kAxpy {
			return c.scalar("alpha", c.alphaP, c.n > 0)
		}
		return c.result1()
	case kNrm2, kScal:
		if err := dim(r, "n", c.n); err != nil {
			return err
		}
		if err := vector(r, "x", c.n, c.x, c.incx, c.t, true); err != nil {
			return err
		}
		if c.kind == kScal {
			return c.scalar("alpha", c.alphaP, c.n > 0)
		}
		return c.result1()
	case kGemv:
		return c.checkGemv()
	case kGemm, kGemmEx:
		return c.checkGemm()
	}
	return invalid(r, "unknown routine kind %d", c.kind)
}

func (c *call) result1() error {
	if c.mode == Device && c.res == 0 {
		return invalid(c.routine, "a null result pointer in device pointer mode")
	}
	return nil
}

// scalar checks a device-mode scalar pointer that the call reads.
func (c *call) scalar(name string, p gpumem.Ptr, used bool) error {
	if c.mode == Device && used && p == 0 {
		return invalid(c.routine, "a null %s pointer in device pointer mode", name)
	}
	return nil
}

func (c *call) checkGemv() error {
	r := c.routine
	if !c.ta.valid() {
		return invalid(r, "trans %v", c.ta)
	}
	if err := dim(r, "m", c.m); err != nil {
		return err
	}
	if err := dim(r, "n", c.n); err != nil {
		return err
	}
	if _, err := matrix(r, "A", c.m, c.n, c.lda, c.a, c.t, true); err != nil {
		return err
	}
	lx, ly := gemvLens(c.ta, c.m, c.n)
	if err := vector(r, "x", lx, c.x, c.incx, c.t, false); err != nil {
		return err
	}
	if err := vector(r, "y", ly, c.y, c.incy, c.t, false); err != nil {
		return err
	}
	if err := c.scalar("alpha", c.alphaP, c.m > 0 && c.n > 0); err != nil {
		return err
	}
	return c.scalar("beta", c.betaP, ly > 0)
}

func (c *call) checkGemm() error {
	r := c.routine
	if !c.ta.valid() || !c.tb.valid() {
		return invalid(r, "transA %v, transB %v", c.ta, c.tb)
	}
	for _, d := range [...]struct {
		name string
		v    int
	}{{"m", c.m}, {"n", c.n}, {"k", c.k}} {
		if err := dim(r, d.name, d.v); err != nil {
			return err
		}
	}
	if c.kind == kGemmEx && c.out != c.t && c.out != F32 {
		return invalid(r, "C of type %v for A and B of type %v (C is %v or f32)", c.out, c.t, c.t)
	}
	ct := c.t
	if c.kind == kGemmEx {
		ct = c.out
	}
	ar, ac := stored(c.ta, c.m, c.k)
	br, bc := stored(c.tb, c.k, c.n)
	// A and B are read only when the product has terms.
	some := c.m > 0 && c.n > 0 && (!c.strided || c.batch > 0)
	inner := some && c.k > 0
	aext, err := matrix(r, "A", ar, ac, c.lda, c.a, c.t, inner)
	if err != nil {
		return err
	}
	bext, err := matrix(r, "B", br, bc, c.ldb, c.b, c.t, inner)
	if err != nil {
		return err
	}
	cext, err := matrix(r, "C", c.m, c.n, c.ldc, c.c, ct, some)
	if err != nil {
		return err
	}
	if c.batch < 0 || c.batch > maxInt32 {
		return invalid(r, "batch count %d (0 to %d)", c.batch, maxInt32)
	}
	if c.batch > 1 {
		if c.sa < 0 || c.sb < 0 {
			return invalid(r, "negative stride (strideA %d, strideB %d)", c.sa, c.sb)
		}
		if c.m > 0 && c.n > 0 && c.sc < cext {
			return invalid(r, "strideC %d is less than C's extent %d: the batch's results would overlap", c.sc, cext)
		}
		for _, o := range [...]struct {
			name        string
			p           gpumem.Ptr
			used        bool
			ext, stride int64
			size        int64
		}{{"A", c.a, inner, aext, c.sa, int64(c.t.Size())}, {"B", c.b, inner, bext, c.sb, int64(c.t.Size())}, {"C", c.c, some, cext, c.sc, int64(ct.Size())}} {
			if o.ext == 0 || !o.used {
				continue
			}
			if o.stride > (maxBytes/o.size-o.ext)/int64(c.batch-1) {
				return invalid(r, "%s: %d batches of stride %d overflow the address space", o.name, c.batch, o.stride)
			}
			if err := span(r, o.name, o.p, (int64(c.batch-1)*o.stride+o.ext)*o.size); err != nil {
				return err
			}
		}
	}
	if err := c.scalar("alpha", c.alphaP, some); err != nil {
		return err
	}
	return c.scalar("beta", c.betaP, some)
}

func dim(r, name string, v int) error {
	if v < 0 || v > maxInt32 {
		return invalid(r, "%s = %d (0 to %d)", name, v, maxInt32)
	}
	return nil
}

// vector checks a vector of n elements of type t at p with increment inc
// (positive only if positive): the increment, the span and the pointer.
func vector(r, name string, n int, p gpumem.Ptr, inc int, t Type, positive bool) error {
	switch {
	case inc == 0:
		return invalid(r, "inc%s = 0", name)
	case positive && inc < 0:
		return invalid(r, "inc%s = %d (this routine takes a positive increment)", name, inc)
	case inc > maxInt32 || inc < -maxInt32:
		return invalid(r, "inc%s = %d out of the int range", name, inc)
	}
	if n == 0 {
		return nil
	}
	abs := int64(inc)
	if abs < 0 {
		abs = -abs
	}
	if int64(n-1) > (maxBytes/int64(t.Size())-1)/abs {
		return invalid(r, "%s: %d elements %d apart overflow the address space", name, n, abs)
	}
	return span(r, name, p, (int64(n-1)*abs+1)*int64(t.Size()))
}

// matrix checks a column-major rows x cols matrix of type t at p with
// leading dimension ld and returns its extent in elements (0 when empty);
// its pointer is checked when the call reads or writes it (used).
func matrix(r, name string, rows, cols, ld int, p gpumem.Ptr, t Type, used bool) (int64, error) {
	if ld < max(1, rows) || ld > maxInt32 {
		return 0, invalid(r, "ld%s = %d; %s has %d rows, so it must be at least %d (and at most %d)", lower(name), ld, name, rows, max(1, rows), maxInt32)
	}
	if rows == 0 || cols == 0 {
		return 0, nil
	}
	ext := int64(cols-1)*int64(ld) + int64(rows)
	if ext > maxBytes/int64(t.Size()) {
		return 0, invalid(r, "%s: %d x %d with ld %d overflows the address space", name, rows, cols, ld)
	}
	if !used {
		return ext, nil // not read: any pointer will do
	}
	return ext, span(r, name, p, ext*int64(t.Size()))
}

func lower(s string) string {
	if s != "" && s[0] >= 'A' && s[0] <= 'Z' {
		return string(s[0]+'a'-'A') + s[1:]
	}
	return s
}

// span checks that bytes from p neither start at 0 nor wrap around.
func span(r, name string, p gpumem.Ptr, bytes int64) error {
	if p == 0 {
		return invalid(r, "%s is a null pointer", name)
	}
	if uint64(p)+uint64(bytes) < uint64(p) {
		return invalid(r, "%s at %#x: %d bytes wrap around the address space", name, uint64(p), bytes)
	}
	return nil
}
