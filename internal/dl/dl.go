// Package dl opens vendor libraries at run time through purego and looks up
// their symbols, turning every failure into an error value that carries the
// dynamic loader's own message.
//
// A library is opened with RTLD_NOW|RTLD_GLOBAL|RTLD_NODELETE (it stays in
// memory after Close; see openMode) from a list of candidates
// (bare sonames such as "libcuda.so.1", which the loader searches for in its
// usual places, or explicit paths); the first that loads wins. When none
// loads, the *LoadError lists every candidate with the message dlerror gave
// for it, and matches gpumem.ErrLibraryNotFound. A symbol that the library
// does not export is a *SymbolError matching gpumem.ErrNotSupported, so that
// an operation a vendor or version lacks degrades to "not supported".
//
// Outside Linux every Open fails, matching gpumem.ErrLibraryNotFound: the
// vendor backends are Linux-only (internal/ccall's trampolines follow Linux's
// calling conventions), while the packages that use them still build there.
//
// Nothing in this package panics.
package dl

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/gpumem/gpumem"
)

// Candidate sonames, in the order they are tried.
var (
	// CUDACandidates are the names of the CUDA driver library.
	CUDACandidates = []string{"libcuda.so.1", "libcuda.so"}
	// HIPCandidates are the names of the HIP runtime library, newest first.
	HIPCandidates = []string{"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"}
)

// Library is an opened shared library. Its methods are safe for concurrent use.
type Library struct {
	// Path is the candidate that loaded, exactly as it was given to Open.
	Path string

	mu     sync.RWMutex
	handle uintptr // 0 once closed
}

// Attempt is one candidate that failed to load and the loader's reason.
type Attempt = gpumem.LoadAttempt

// LoadError reports that no candidate library could be loaded. It matches
// gpumem.ErrLibraryNotFound. It is gpumem.LoadError, so that users inspect it
// with errors.As from the public package.
type LoadError = gpumem.LoadError

// SymbolError reports a symbol the library does not export. It matches
// gpumem.ErrNotSupported.
type SymbolError struct {
	Library string // the library's Path
	Symbol  string
	Message string // the dlsym error message
}

// Error names the symbol, the library and the loader's message.
func (e *SymbolError) Error() string {
	return fmt.Sprintf("dl: symbol %s not found in %s: %s", e.Symbol, e.Library, e.Message)
}

// Is matches gpumem.ErrNotSupported.
func (e *SymbolError) Is(target error) bool { return target == gpumem.ErrNotSupported }

// errClosed is returned by Sym after Close.
var errClosed = fmt.Errorf("dl: library closed: %w", gpumem.ErrClosed)

// Open loads the first of candidates that the dynamic loader accepts. Each
// candidate is a bare soname (searched for the way dlopen searches) or a path.
// When none loads it returns a *LoadError naming each candidate and why.
func Open(candidates ...string) (*Library, error) {
	tried := make([]Attempt, 0, len(candidates))
	for _, name := range candidates {
		h, msg := dlopen(name)
		if h != 0 {
			return &Library{Path: name, handle: h}, nil
		}
		tried = append(tried, Attempt{Name: name, Message: msg})
	}
	return nil, &LoadError{Tried: tried}
}

// dlopen opens one candidate; on failure it returns 0 and the loader's message.
func dlopen(name string) (h uintptr, msg string) {
	switch {
	case name == "":
		// dlopen("") would return the main program, not a library.
		return 0, "empty library name"
	case strings.IndexByte(name, 0) >= 0:
		return 0, "library name contains a NUL byte"
	}
	defer func() {
		if r := recover(); r != nil {
			h, msg = 0, fmt.Sprint("dlopen failed: ", r)
		}
	}()
	// dlerror's message belongs to the calling thread: keep dlopen and
	// dlerror on one thread so the message read is the one for this call.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := sysDlopen(name)
	if h != 0 {
		return h, ""
	}
	if err != nil && err.Error() != "" {
		return 0, err.Error()
	}
	return 0, "dlopen failed without a message"
}

// Sym returns the address of the named symbol. A symbol the library does not
// export is a *SymbolError matching gpumem.ErrNotSupported; after Close the
// error matches gpumem.ErrClosed.
func (l *Library) Sym(name string) (uintptr, error) {
	if l == nil {
		return 0, errClosed
	}
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return 0, &SymbolError{Library: l.Path, Symbol: name, Message: "invalid symbol name"}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.handle == 0 {
		return 0, errClosed
	}
	addr, msg := dlsym(l.handle, name)
	if addr == 0 {
		return 0, &SymbolError{Library: l.Path, Symbol: name, Message: msg}
	}
	return addr, nil
}

// SymFirst returns the first of names that the library exports, and which
// one it was: the way to prefer a versioned symbol (cuMemAdvise_v2) and fall
// back to an older one (cuMemAdvise). When none resolves, the error is the
// *SymbolError of the first name, with the others' messages appended, and
// matches gpumem.ErrNotSupported.
func (l *Library) SymFirst(names ...string) (addr uintptr, name string, err error) {
	var first *SymbolError
	var msgs []string
	for _, n := range names {
		addr, err := l.Sym(n)
		if err == nil {
			return addr, n, nil
		}
		se, ok := err.(*SymbolError)
		if !ok {
			return 0, "", err // closed
		}
		if first == nil {
			first = se
		}
		msgs = append(msgs, se.Message)
	}
	if first == nil {
		return 0, "", &SymbolError{Library: l.pathOrEmpty(), Message: "no symbol names given"}
	}
	return 0, "", &SymbolError{Library: first.Library, Symbol: first.Symbol, Message: strings.Join(msgs, "; ")}
}

func (l *Library) pathOrEmpty() string {
	if l == nil {
		return ""
	}
	return l.Path
}

func dlsym(h uintptr, name string) (addr uintptr, msg string) {
	defer func() {
		if r := recover(); r != nil {
			addr, msg = 0, fmt.Sprint("dlsym failed: ", r)
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	addr, err := sysDlsym(h, name)
	if addr != 0 {
		return addr, ""
	}
	if err != nil && err.Error() != "" {
		return 0, err.Error()
	}
	return 0, "undefined symbol"
}

// Close releases the library. Closing twice, or a nil Library, is not an
// error. Addresses obtained from Sym must not be used after Close.
func (l *Library) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.handle
	if h == 0 {
		return nil
	}
	l.handle = 0
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("dl: dlclose %s: %v", l.Path, r)
			}
		}()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if e := sysDlclose(h); e != nil {
			err = fmt.Errorf("dl: dlclose %s: %w", l.Path, e)
		}
	}()
	return err
}

// Handle returns the dlopen handle, or 0 after Close.
func (l *Library) Handle() uintptr {
	if l == nil {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.handle
}

// Object is an opened library as the packages that bind it see it: the
// seam between them and the dynamic loader (tests give fakes). bind.Object,
// the backends' and the run-time compilers' libraries are this interface.
type Object interface {
	// Path is the library file as it was opened.
	Path() string
	// Sym returns the address of an exported symbol; a missing symbol is
	// an error matching gpumem.ErrNotSupported.
	Sym(name string) (uintptr, error)
	// Close releases the library.
	Close() error
}

type object struct{ l *Library }

func (o object) Path() string                     { return o.l.Path }
func (o object) Sym(name string) (uintptr, error) { return o.l.Sym(name) }
func (o object) Close() error                     { return o.l.Close() }

// Load is Open returning the library as an Object.
func Load(candidates ...string) (Object, error) {
	l, err := Open(candidates...)
	if err != nil {
		return nil, err
	}
	return object{l}, nil
}
