package bind

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ccall"
	"github.com/gpumem/gpumem/internal/dl"
	"github.com/gpumem/gpumem/internal/symtab"
)

// Vendor selects the column of a table: CUDA (NVIDIA) or HIP (AMD).
type Vendor = symtab.Vendor

// Vendors.
const (
	CUDA       = symtab.CUDA
	HIP        = symtab.HIP
	NumVendors = symtab.NumVendors
)

// Op is a row's index in its table.
type Op = symtab.Op

// Func is one function of a library in every vendor's dialect: a row of a
// Table. Set Op, Symbol, Args, Required and Notes; NewTable numbers the
// rows (ID). ABI is used by the CUDA driver's table only.
type Func = symtab.Row

// Arity is a Func's Args column: how many argument words each vendor's
// function takes. Build it with Args or ArgsPer; the zero Arity declares
// nothing, and calls are then not checked (a variadic function).
//
// Each element is 0 (not declared), NoArgs (a function of no arguments)
// or the count of words. A vendor without a symbol is never checked.
type Arity = symtab.Arity

// NoArgs is the Arity element of a function of no arguments, f(void).
const NoArgs = symtab.NoArgs

// Args declares a function that takes n argument words for every vendor:
// Func{..., Args: bind.Args(2)}. Args(0) declares a function of no
// arguments.
func Args(n int) Arity { return symtab.Args(n) }

// ArgsPer declares a function whose vendors take different numbers of
// argument words (hipMemcpy takes a copy kind that cuMemcpy does not:
// ArgsPer(3, 4)). 0 declares a function of no arguments.
func ArgsPer(cuda, hip int) Arity { return symtab.ArgsPer(cuda, hip) }

// Table is a library's functions as data, one Func per row, indexed by Op.
type Table = symtab.Table

// MaxArgs is the most argument words a call passes.
const MaxArgs = ccall.MaxArgs

// Required-flag values for a Func.
var (
	// Both: the library is useless without the function on either vendor.
	Both = [NumVendors]bool{true, true}
	// CUDAOnly: required for CUDA, optional (or absent) for HIP.
	CUDAOnly = [NumVendors]bool{true, false}
	// HIPOnly: required for HIP, optional (or absent) for CUDA.
	HIPOnly = [NumVendors]bool{false, true}
)

// Symbols returns a Func's Symbol column from the CUDA and HIP names.
func Symbols(cuda, hip string) [NumVendors]string {
	return [NumVendors]string{CUDA: cuda, HIP: hip}
}

// NewTable returns a table of funcs, numbering them in order: the first
// is Op 0.
func NewTable(name string, funcs ...Func) *Table {
	rows := make([]Func, len(funcs))
	for i, f := range funcs {
		f.ID = Op(i)
		rows[i] = f
	}
	return &Table{Name: name, Rows: rows}
}

// Library declares a vendor library: where to find it, its functions and
// how it reports failure.
type Library struct {
	// Name is what errors and the symbols command call the library
	// ("cublas").
	Name string
	// Files are the candidate file names for each vendor, tried in
	// order: sonames the dynamic loader searches for, or paths.
	Files [NumVendors][]string
	// Env, when set, is an environment variable that names the file to
	// load; when it is set in the environment, only that file is tried.
	Env string
	// Table is the library's functions.
	Table *Table
	// Status is the library's status convention.
	Status Status
	// Version, if not nil, asks an opened library for its version, as the
	// symbols command and Lib.Version report it.
	Version func(l *Lib) (string, error)
}

// Status is a library's status convention: which result means success,
// and how a status is named.
type Status struct {
	// Success is the result that means success (0 for every library
	// gpumem ships).
	Success int
	// Name, if not nil, returns a status's name or description ("" if
	// unknown). NameFunc, NameOut and NameTable build the usual ones.
	Name func(l *Lib, code int) string
	// Sentinel, if not nil, returns the gpumem sentinel a status means
	// (gpumem.ErrOutOfMemory, gpumem.ErrInvalidValue...), or nil.
	Sentinel func(code int) error
}

// NameFunc names a status with the library's const char *f(status)
// function at row op (cublasGetStatusName, ncclGetErrorString,
// nvmlErrorString).
func NameFunc(op Op) func(l *Lib, code int) string {
	return func(l *Lib, code int) string {
		r, err := l.Call(op, uintptr(uint32(int32(code))))
		if err != nil {
			return ""
		}
		return CString(r)
	}
}

// NameOut names a status with the library's status f(status, const char
// **out) function at row op (rsmi_status_string).
func NameOut(op Op) func(l *Lib, code int) string {
	return func(l *Lib, code int) string {
		out := new(uintptr)
		escape(out)
		r, err := l.Call(op, uintptr(uint32(int32(code))), addrOf(out))
		if err != nil || int32(r) != int32(l.lib.Status.Success) {
			return ""
		}
		return CString(*out)
	}
}

// NameTable names a status from a fixed table.
func NameTable(names map[int]string) func(l *Lib, code int) string {
	return func(_ *Lib, code int) string { return names[code] }
}

// Object is an opened shared library as the loader gives it: Path (the
// file as it was opened), Sym (an exported symbol's address; a missing
// symbol is an error matching gpumem.ErrNotSupported) and Close. The
// backends and the run-time compilers load their libraries as Objects too.
type Object = dl.Object

// Loader opens the first loadable file among candidates.
type Loader func(candidates ...string) (Object, error)

// Option configures Open and Resolve.
type Option func(*options)

type options struct {
	path string
	load Loader
}

// WithPath loads the library from path (a file name or soname) instead of
// the environment variable and the candidates.
func WithPath(path string) Option { return func(o *options) { o.path = path } }

// WithLoader replaces the dynamic loader (tests, or a loader with its own
// search rules).
func WithLoader(l Loader) Option { return func(o *options) { o.load = l } }

// DL is the Loader of real libraries: dlopen with RTLD_NOW|RTLD_GLOBAL,
// through purego.
func DL(candidates ...string) (Object, error) { return dl.Load(candidates...) }

// Lib is an opened library with its table resolved. Its methods are safe
// for concurrent use.
type Lib struct {
	lib    *Library
	vendor Vendor
	obj    Object
	fns    []uintptr
	miss   []error // why a row did not resolve
	closed atomic.Bool

	names sync.Map // status code -> name
}

// Errors of Open and the calls.
var (
	errNoTable = fmt.Errorf("library declares no table: %w", gpumem.ErrInvalidValue)
	errNilLib  = fmt.Errorf("gpumem: bind: a nil library: %w", gpumem.ErrInvalidValue)
)

// Candidates returns the files Open tries for vendor v, in order: the
// WithPath option's, else the environment variable's, else the declared
// candidates.
func (lib *Library) Candidates(v Vendor, opts ...Option) []string {
	if lib == nil {
		return nil
	}
	o := collect(opts)
	return lib.candidates(v, o)
}

func collect(opts []Option) options {
	o := options{load: DL}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.load == nil {
		o.load = DL
	}
	return o
}

func (lib *Library) candidates(v Vendor, o options) []string {
	if o.path != "" {
		return []string{o.path}
	}
	if lib.Env != "" {
		if p := strings.TrimSpace(os.Getenv(lib.Env)); p != "" {
			return []string{p}
		}
	}
	if v < 0 || v >= NumVendors {
		return nil
	}
	return lib.Files[v]
}

func (lib *Library) validate(v Vendor, o options) error {
	if lib == nil {
		return fmt.Errorf("gpumem: bind: nil library: %w", gpumem.ErrInvalidValue)
	}
	if lib.Table == nil {
		return fmt.Errorf("gpumem: bind: %s: %w", lib.Name, errNoTable)
	}
	if v < 0 || v >= NumVendors {
		return fmt.Errorf("gpumem: bind: %s: unknown vendor %d: %w", lib.Name, int(v), gpumem.ErrInvalidValue)
	}
	for i, r := range lib.Table.Rows {
		if r.ID != Op(i) {
			return fmt.Errorf("gpumem: bind: %s: row %d (%s) has id %d (build tables with NewTable): %w", lib.Name, i, r.Op, r.ID, gpumem.ErrInvalidValue)
		}
		if !r.Args.Valid(MaxArgs) {
			return fmt.Errorf("gpumem: bind: %s: %s: argument words %v: each vendor's must be 0 (undeclared), NoArgs or 1 to %d (build them with Args or ArgsPer): %w", lib.Name, r.Op, [NumVendors]int(r.Args), MaxArgs, gpumem.ErrInvalidValue)
		}
		if r.Required[v] && r.Symbol[v] == "" {
			return fmt.Errorf("gpumem: bind: %s: %s is required for %s but names no %s symbol: %w", lib.Name, r.Op, v, v, gpumem.ErrInvalidValue)
		}
	}
	if len(lib.Files[v]) == 0 && lib.Env == "" && o.path == "" {
		return fmt.Errorf("gpumem: bind: %s: no file names for %s: %w", lib.Name, v, gpumem.ErrNotSupported)
	}
	return nil
}

// load opens the library and resolves every row; it does not fail on
// missing symbols.
func load(lib *Library, v Vendor, o options) (*Lib, error) {
	if err := lib.validate(v, o); err != nil {
		return nil, err
	}
	cands := lib.candidates(v, o)
	if len(cands) == 0 {
		return nil, fmt.Errorf("gpumem: bind: %s: %w", lib.Name, &gpumem.LoadError{})
	}
	obj, err := o.load(cands...)
	if err != nil {
		return nil, fmt.Errorf("gpumem: bind: %s: %w", lib.Name, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("gpumem: bind: %s: loader returned no library: %w", lib.Name, gpumem.ErrLibraryNotFound)
	}
	l := &Lib{lib: lib, vendor: v, obj: obj}
	n := len(lib.Table.Rows)
	l.fns, l.miss = make([]uintptr, n), make([]error, n)
	for i := range lib.Table.Rows {
		sym := lib.Table.Rows[i].Symbol[v]
		if sym == "" {
			l.miss[i] = fmt.Errorf("%s has no %s function", v, lib.Table.Rows[i].Op)
			continue
		}
		addr, err := obj.Sym(sym)
		if err != nil || addr == 0 {
			if err == nil {
				err = fmt.Errorf("symbol %s resolved to 0", sym)
			}
			l.miss[i] = err
			continue
		}
		l.fns[i] = addr
	}
	return l, nil
}

// Open loads lib for vendor v and resolves its table. It fails with a
// *gpumem.LoadError when no candidate file loads and with a
// *gpumem.MissingSymbolsError naming every required symbol the file lacks
// (the file is closed again).
func Open(lib *Library, v Vendor, opts ...Option) (*Lib, error) {
	l, err := load(lib, v, collect(opts))
	if err != nil {
		return nil, err
	}
	var missing []string
	for i, r := range lib.Table.Rows {
		if r.Required[v] && l.fns[i] == 0 {
			missing = append(missing, r.Symbol[v])
		}
	}
	if len(missing) > 0 {
		path := l.obj.Path()
		_ = l.obj.Close()
		return nil, &gpumem.MissingSymbolsError{Backend: lib.Name, Library: path, Symbols: missing}
	}
	return l, nil
}

// Library returns the declaration l was opened from (nil for a nil Lib).
func (l *Lib) Library() *Library {
	if l == nil {
		return nil
	}
	return l.lib
}

// Vendor returns the column l was resolved with.
func (l *Lib) Vendor() Vendor {
	if l == nil {
		return 0
	}
	return l.vendor
}

// Path returns the file as it was opened ("" for a nil Lib).
func (l *Lib) Path() string {
	if l == nil {
		return ""
	}
	return l.obj.Path()
}

// Version asks the library for its version through Library.Version; it
// fails with ErrNotSupported when the declaration has no version query.
func (l *Lib) Version() (string, error) {
	if l == nil {
		return "", errNilLib
	}
	if l.lib.Version == nil {
		return "", fmt.Errorf("gpumem: bind: %s declares no version query: %w", l.lib.Name, gpumem.ErrNotSupported)
	}
	return l.lib.Version(l)
}

// Has reports whether row op resolved.
func (l *Lib) Has(op Op) bool { return l != nil && uint(op) < uint(len(l.fns)) && l.fns[op] != 0 }

// Addr returns the address of row op's function, or why there is none.
func (l *Lib) Addr(op Op) (uintptr, error) {
	if l == nil {
		return 0, errNilLib
	}
	if l.closed.Load() {
		return 0, l.closedErr()
	}
	if uint(op) >= uint(len(l.fns)) {
		return 0, l.badOp(op)
	}
	if l.fns[op] == 0 {
		return 0, l.notSupported(op)
	}
	return l.fns[op], nil
}

// Close releases the library. Calls after Close fail with an error
// matching gpumem.ErrClosed; a second Close does nothing.
func (l *Lib) Close() error {
	if l == nil {
		return fmt.Errorf("gpumem: bind: Close of a nil library: %w", gpumem.ErrInvalidValue)
	}
	if l.closed.Swap(true) {
		return nil
	}
	return l.obj.Close()
}

func (l *Lib) closedErr() error {
	return fmt.Errorf("gpumem: %s: library is closed: %w", l.lib.Name, gpumem.ErrClosed)
}

func (l *Lib) badOp(op Op) error {
	return fmt.Errorf("gpumem: %s: no row %d in table %s (%d rows): %w", l.lib.Name, int(op), l.lib.Table.Name, len(l.fns), gpumem.ErrInvalidValue)
}

func (l *Lib) notSupported(op Op) error {
	r := &l.lib.Table.Rows[op]
	reason := "not resolved"
	if l.miss[op] != nil {
		reason = l.miss[op].Error()
	}
	name := r.Symbol[l.vendor]
	if name == "" {
		name = r.Op
	}
	return &gpumem.NotSupportedError{Backend: l.lib.Name, Op: name, Reason: reason}
}
