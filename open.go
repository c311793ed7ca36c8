package gpumem

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// Opener opens a backend. library is an explicit library path, or "" to try
// the backend's candidate names.
type Opener func(library string) (Backend, error)

// Registration describes a backend to Open and to tools: everything that
// names a vendor lives here, so that Open and the command-line tool name
// none. Backend packages register from init.
type Registration struct {
	// Name is what GPUMEM_BACKEND and Options.Backend call the backend
	// ("cuda", "hip", "sim"); lower case.
	Name string
	// LibraryEnv is the environment variable that names the backend's
	// library file when Options.Library is empty ("" for none).
	LibraryEnv string
	// AutoOrder places the backend in "auto"'s order: backends with a
	// positive AutoOrder are tried from the lowest up (ties by name); 0
	// means auto never tries it (the simulator).
	AutoOrder int
	// Open opens the backend; required.
	Open Opener
	// Symbols resolves the backend's symbol table against a library ("" for
	// its candidates) without initialising the library (nil: the backend
	// loads no library).
	Symbols func(library string) (SymbolReport, error)
	// FormatVersion formats a version number in the backend's numbering
	// ("12.2"), or returns "" when v is not in that form (nil: none).
	FormatVersion func(v int) string
}

var (
	registryMu sync.Mutex
	registry   = map[string]Registration{}
)

// Register makes a backend available to Open under r.Name. Backend packages
// call it from init; registering a name twice replaces it. An empty name or
// a nil Open is a mistake in the program and panics.
func Register(r Registration) {
	if r.Name == "" || r.Name != strings.ToLower(strings.TrimSpace(r.Name)) || r.Name == "auto" {
		panic(fmt.Sprintf("gpumem: Register: bad backend name %q", r.Name))
	}
	if r.Open == nil {
		panic("gpumem: Register: backend " + r.Name + " has no Open")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[r.Name] = r
}

// Lookup returns the registration of the backend called name.
func Lookup(name string) (Registration, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	r, ok := registry[name]
	return r, ok
}

// Registered lists the registered backend names, sorted.
func Registered() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// AutoOrder lists the registrations "auto" tries, in order.
func AutoOrder() []Registration {
	registryMu.Lock()
	defer registryMu.Unlock()
	var out []Registration
	for _, r := range registry {
		if r.AutoOrder > 0 {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].AutoOrder != out[j].AutoOrder {
			return out[i].AutoOrder < out[j].AutoOrder
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Options choose a backend. Zero fields are taken from the environment:
// GPUMEM_BACKEND, and the chosen backend's library variable
// (Registration.LibraryEnv: GPUMEM_CUDA_LIBRARY, GPUMEM_HIP_LIBRARY).
type Options struct {
	Backend string // a registered name ("cuda", "hip", "sim") or "auto"
	Library string // explicit library path for the chosen backend (not with auto)
}

// Open opens a backend as Options and the environment say. With "auto" (the
// default) it tries the backends with an auto order (CUDA, then HIP); when
// every one fails the error, an *OpenError, names each library tried and
// why. The simulator is chosen only by name.
func Open(opts Options) (Backend, error) {
	name := strings.ToLower(strings.TrimSpace(opts.Backend))
	if name == "" {
		name = strings.ToLower(strings.TrimSpace(os.Getenv("GPUMEM_BACKEND")))
	}
	if name == "" {
		name = "auto"
	}
	if name == "auto" {
		if opts.Library != "" {
			return nil, fmt.Errorf("gpumem: a library path needs an explicit backend (%s), not auto: %w", choices(" or ", false), ErrInvalidValue)
		}
		regs := AutoOrder()
		if len(regs) == 0 {
			return nil, &OpenError{Tried: []error{fmt.Errorf("gpumem: no GPU backend is linked into this program (import github.com/gpumem/gpumem/all): %w", ErrNotSupported)}}
		}
		var errs []error
		for _, r := range regs {
			b, err := r.Open(r.library(""))
			if err == nil {
				return b, nil
			}
			errs = append(errs, err)
		}
		return nil, &OpenError{Tried: errs}
	}
	r, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("gpumem: unknown backend %q (want %s or auto; GPUMEM_BACKEND): %w", name, choices(", ", true), ErrInvalidValue)
	}
	if opts.Library != "" && r.LibraryEnv == "" && r.Symbols == nil {
		return nil, fmt.Errorf("gpumem: backend %s loads no library, and was given %q: %w", r.Name, opts.Library, ErrInvalidValue)
	}
	return r.Open(r.library(opts.Library))
}

// library is the library file to open: explicit, else the backend's
// environment variable, else "" for its candidates.
func (r *Registration) library(explicit string) string {
	if explicit != "" || r.LibraryEnv == "" {
		return explicit
	}
	return os.Getenv(r.LibraryEnv)
}

// choices joins the registered names with sep, for messages: every
// backend with all, else only those that load a library (in auto order).
func choices(sep string, all bool) string {
	var names []string
	if all {
		names = Registered()
	} else {
		for _, r := range AutoOrder() {
			names = append(names, r.Name)
		}
	}
	return strings.Join(names, sep)
}

// OpenError is returned by Open with "auto" when no backend could be opened.
type OpenError struct {
	Tried []error // one per backend tried, in order
}

// Error lists each backend tried and why it failed.
func (e *OpenError) Error() string {
	var b strings.Builder
	b.WriteString("gpumem: no GPU backend could be opened")
	for _, err := range e.Tried {
		b.WriteString("; ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// Is matches ErrNoDevice when at least one backend loaded but found no
// device, and any other error (ErrLibraryNotFound, ErrNotSupported, ...)
// when every backend tried failed with it.
func (e *OpenError) Is(target error) bool {
	if target == ErrNoDevice {
		for _, err := range e.Tried {
			if errors.Is(err, ErrNoDevice) {
				return true
			}
		}
		return false
	}
	for _, err := range e.Tried {
		if !errors.Is(err, target) {
			return false
		}
	}
	return len(e.Tried) > 0
}
