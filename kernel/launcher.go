package kernel

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/nilcheck"
)

// Launcher launches one kernel with arguments set through typed setters.
// Its argument array lives outside the Go heap (see the package overview);
// Close releases it. Its methods are safe for concurrent use.
type Launcher struct {
	k    gpumem.Kernels
	f    gpumem.Function
	args []Arg
	offs []uintptr // offset of each argument's bytes in mem

	mu     sync.Mutex
	mem    []byte // the mapping: pointer array, then the arguments
	set    []bool
	unset  int // arguments never set
	closed bool
}

// New lays out the parameter array of f for the declared signature, one
// Arg per kernel parameter in order, in memory mapped outside the Go heap.
// A kernel with no parameters takes no Args. A nil k (or a nil pointer in
// it), a zero f or a bad declaration (an unknown kind, a struct whose size
// or alignment is impossible, parameters that take more than
// MaxParamBytes together) is an error matching gpumem.ErrInvalidValue,
// and so is a signature that differs from the kernel's parameters in count
// or sizes where k reports them (gpumem.ParamReporter: the simulator, CUDA
// 12.4 and later).
func New(k gpumem.Kernels, f gpumem.Function, sig ...Arg) (*Launcher, error) {
	if nilcheck.Is(k) {
		return nil, fmt.Errorf("kernel: New: nil Kernels: %w", gpumem.ErrInvalidValue)
	}
	if f.Handle == 0 {
		return nil, fmt.Errorf("kernel: New: zero function: %w", gpumem.ErrInvalidValue)
	}
	n := len(sig)
	offs := make([]uintptr, n)
	end := uintptr(n) * 8
	var params uintptr // the parameters as the kernel lays them out, from 0
	for i, a := range sig {
		if why := a.valid(); why != "" {
			return nil, fmt.Errorf("kernel: %s: argument %d: %s: %w", f.Name, i, why, gpumem.ErrInvalidValue)
		}
		al := a.align()
		end = (end + al - 1) &^ (al - 1)
		offs[i] = end
		end += uintptr(a.Size())
		params = (params+al-1)&^(al-1) + uintptr(a.Size())
		if params > MaxParamBytes {
			return nil, fmt.Errorf("kernel: %s: the parameters take %d bytes or more by argument %d, over the %d a kernel may take: %w",
				f.Name, params, i, MaxParamBytes, gpumem.ErrInvalidValue)
		}
	}
	if pr, ok := k.(gpumem.ParamReporter); ok {
		if err := checkParams(pr, f, sig); err != nil {
			return nil, err
		}
	}
	ps := uintptr(pageSize())
	size := (end + ps - 1) &^ (ps - 1)
	if size == 0 {
		size = ps
	}
	mem, err := mapPages(int(size))
	if err != nil {
		return nil, err
	}
	l := &Launcher{k: k, f: f, args: append([]Arg(nil), sig...), offs: offs, mem: mem, set: make([]bool, n), unset: n}
	base := l.base()
	for i, off := range offs {
		*(*uintptr)(unsafe.Pointer(&mem[i*8])) = base + off
	}
	return l, nil
}

// checkParams compares the declared signature with the parameters the
// vendor reports for f: a count or a size that differs would have the
// vendor read argument bytes that are not there. Where the vendor cannot
// report them (ErrNotSupported: HIP, CUDA before 12.4) the signature stays
// the caller's word.
func checkParams(pr gpumem.ParamReporter, f gpumem.Function, sig []Arg) error {
	ps, err := pr.FuncParams(f)
	if errors.Is(err, gpumem.ErrNotSupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kernel: %s: reading its parameters: %w", f.Name, err)
	}
	if len(ps) != len(sig) {
		return fmt.Errorf("kernel: %s takes %d parameters, %d declared: %w", f.Name, len(ps), len(sig), gpumem.ErrInvalidValue)
	}
	for i, p := range ps {
		if uint64(sig[i].Size()) != p.Size {
			return fmt.Errorf("kernel: %s: parameter %d has %d bytes, declared %s of %d: %w",
				f.Name, i, p.Size, sig[i], sig[i].Size(), gpumem.ErrInvalidValue)
		}
	}
	return nil
}

func (l *Launcher) base() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(l.mem))) }

// Clone returns a new Launcher of the same kernel and signature, with
// arguments of its own (all unset).
func (l *Launcher) Clone() (*Launcher, error) {
	if l == nil {
		return nil, errNil("Clone")
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, l.closedErr()
	}
	return New(l.k, l.f, l.args...)
}

// Function returns the kernel the Launcher launches.
func (l *Launcher) Function() gpumem.Function {
	if l == nil {
		return gpumem.Function{}
	}
	return l.f
}

// NumArgs returns the number of declared parameters.
func (l *Launcher) NumArgs() int {
	if l == nil {
		return 0
	}
	return len(l.args)
}

// Signature returns the declared parameters.
func (l *Launcher) Signature() []Arg {
	if l == nil {
		return nil
	}
	return append([]Arg(nil), l.args...)
}

// slot checks argument i against kind want under l.mu and returns where
// its bytes go; nil with an error when the index or kind does not match.
// want 0 accepts a struct.
func (l *Launcher) slot(i int, want Arg) (unsafe.Pointer, error) {
	if l.closed {
		return nil, l.closedErr()
	}
	if uint(i) >= uint(len(l.args)) {
		return nil, fmt.Errorf("kernel: %s: argument %d: the signature has %d: %w", l.f.Name, i, len(l.args), gpumem.ErrInvalidValue)
	}
	if got := l.args[i]; got != want && (want != 0 || got.kind() != kStruct) {
		what := want.String()
		if want == 0 {
			what = "Struct"
		}
		return nil, fmt.Errorf("kernel: %s: argument %d is declared %s, set as %s: %w", l.f.Name, i, got, what, gpumem.ErrInvalidValue)
	}
	if !l.set[i] {
		l.set[i] = true
		l.unset--
	}
	return unsafe.Pointer(&l.mem[l.offs[i]]), nil
}

// errNil is the error of method op on a nil *Launcher (what a failed New
// returns).
func errNil(op string) error {
	return fmt.Errorf("kernel: %s on a nil launcher: %w", op, gpumem.ErrInvalidValue)
}

func (l *Launcher) closedErr() error {
	return fmt.Errorf("kernel: %s: launcher is closed: %w", l.f.Name, gpumem.ErrClosed)
}

// setArg stores v in argument i, declared want, for the setter op (named
// in the error of a nil *Launcher).
func setArg[T any](l *Launcher, op string, i int, want Arg, v T) error {
	if l == nil {
		return errNil(op)
	}
	l.mu.Lock()
	p, err := l.slot(i, want)
	if err == nil {
		*(*T)(p) = v
	}
	l.mu.Unlock()
	return err
}

// SetPtr sets argument i, declared Ptr.
func (l *Launcher) SetPtr(i int, p gpumem.Ptr) error { return setArg(l, "SetPtr", i, Ptr, uint64(p)) }

// SetI8 sets argument i, declared Int8.
func (l *Launcher) SetI8(i int, v int8) error { return setArg(l, "SetI8", i, Int8, v) }

// SetI16 sets argument i, declared Int16.
func (l *Launcher) SetI16(i int, v int16) error { return setArg(l, "SetI16", i, Int16, v) }

// SetI32 sets argument i, declared Int32.
func (l *Launcher) SetI32(i int, v int32) error { return setArg(l, "SetI32", i, Int32, v) }

// SetI64 sets argument i, declared Int64.
func (l *Launcher) SetI64(i int, v int64) error { return setArg(l, "SetI64", i, Int64, v) }

// SetU8 sets argument i, declared Uint8.
func (l *Launcher) SetU8(i int, v uint8) error { return setArg(l, "SetU8", i, Uint8, v) }

// SetU16 sets argument i, declared Uint16.
func (l *Launcher) SetU16(i int, v uint16) error { return setArg(l, "SetU16", i, Uint16, v) }

// SetU32 sets argument i, declared Uint32.
func (l *Launcher) SetU32(i int, v uint32) error { return setArg(l, "SetU32", i, Uint32, v) }

// SetU64 sets argument i, declared Uint64.
func (l *Launcher) SetU64(i int, v uint64) error { return setArg(l, "SetU64", i, Uint64, v) }

// SetF32 sets argument i, declared Float32.
func (l *Launcher) SetF32(i int, v float32) error {
	return setArg(l, "SetF32", i, Float32, math.Float32bits(v))
}

// SetF64 sets argument i, declared Float64.
func (l *Launcher) SetF64(i int, v float64) error {
	return setArg(l, "SetF64", i, Float64, math.Float64bits(v))
}

// SetStruct sets argument i, declared Struct(size, align), to b: the
// struct's bytes as C lays it out, exactly size of them. The bytes are
// copied; b may be reused at once.
func (l *Launcher) SetStruct(i int, b []byte) error {
	if l == nil {
		return errNil("SetStruct")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.closedErr()
	}
	if uint(i) < uint(len(l.args)) && l.args[i].kind() == kStruct && len(b) != l.args[i].Size() {
		return fmt.Errorf("kernel: %s: argument %d is %s, given %d bytes: %w", l.f.Name, i, l.args[i], len(b), gpumem.ErrInvalidValue)
	}
	p, err := l.slot(i, 0)
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(p), len(b)), b)
	return nil
}

// Launch launches the kernel on s with the arguments as set, grid and
// block sizes and dynamic shared memory bytes (see gpumem.Kernels'
// LaunchKernel: a zero component counts as 1). It fails with an error
// matching gpumem.ErrInvalidValue while an argument has never been set.
// It allocates nothing when the launch succeeds.
func (l *Launcher) Launch(s gpumem.Stream, grid, block gpumem.Dim3, sharedMem uint32) error {
	if l == nil {
		return errNil("Launch")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.closedErr()
	}
	if l.unset != 0 {
		return l.unsetErr()
	}
	params := gpumem.KernelParams{Count: len(l.args)}
	if len(l.args) > 0 {
		params.Array = l.base()
	}
	return l.k.LaunchKernel(l.f, grid, block, sharedMem, s, params)
}

func (l *Launcher) unsetErr() error {
	for i, ok := range l.set {
		if !ok {
			return fmt.Errorf("kernel: %s: argument %d (%s) was never set (%d unset): %w", l.f.Name, i, l.args[i], l.unset, gpumem.ErrInvalidValue)
		}
	}
	return nil
}

// Close releases the argument memory. Launches already made are not
// affected (the vendor copied the arguments); later calls fail with an
// error matching gpumem.ErrClosed. Close is idempotent.
func (l *Launcher) Close() error {
	if l == nil {
		return errNil("Close")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	mem := l.mem
	l.mem = nil
	return unmapPages(mem)
}
