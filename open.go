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

var (
	registryMu sync.Mutex
	registry   = map[string]Opener{}
)

// Register makes a backend available to Open under name ("cuda", "hip", "sim").
// Backend packages call it from init; registering a name twice replaces it.
func Register(name string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry[name] = open
}

func lookup(name string) (Opener, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	o, ok := registry[name]
	return o, ok
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

// Options choose a backend. Zero fields are taken from the environment:
// GPUMEM_BACKEND, GPUMEM_CUDA_LIBRARY, GPUMEM_HIP_LIBRARY.
type Options struct {
	Backend string // "cuda", "hip", "sim" or "auto"
	Library string // explicit library path for the chosen backend (not with auto)
}

// Open opens a backend as Options and the environment say. With "auto" (the
// default) it tries CUDA, then HIP; when both fail the error names each library
// tried and why. The simulator is chosen only by name.
func Open(opts Options) (Backend, error) {
	name := strings.ToLower(strings.TrimSpace(opts.Backend))
	if name == "" {
		name = strings.ToLower(strings.TrimSpace(os.Getenv("GPUMEM_BACKEND")))
	}
	if name == "" {
		name = "auto"
	}
	switch name {
	case "auto":
		if opts.Library != "" {
			return nil, fmt.Errorf("gpumem: a library path needs an explicit backend (cuda or hip), not auto: %w", ErrInvalidValue)
		}
		var errs []error
		for _, n := range []string{"cuda", "hip"} {
			b, err := openNamed(n, libraryFor(n, ""))
			if err == nil {
				return b, nil
			}
			errs = append(errs, err)
		}
		return nil, &OpenError{Tried: errs}
	case "cuda", "hip", "sim":
		return openNamed(name, libraryFor(name, opts.Library))
	default:
		return nil, fmt.Errorf("gpumem: unknown backend %q (want cuda, hip, sim or auto; GPUMEM_BACKEND): %w", name, ErrInvalidValue)
	}
}

func libraryFor(name, explicit string) string {
	if explicit != "" {
		return explicit
	}
	switch name {
	case "cuda":
		return os.Getenv("GPUMEM_CUDA_LIBRARY")
	case "hip":
		return os.Getenv("GPUMEM_HIP_LIBRARY")
	}
	return ""
}

func openNamed(name, library string) (Backend, error) {
	o, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("gpumem: backend %q is not linked into this program (import github.com/gpumem/gpumem/all): %w", name, ErrNotSupported)
	}
	return o(library)
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

// Is matches ErrLibraryNotFound only when every backend failed to load its
// library, and ErrNoDevice when at least one loaded but found no device.
func (e *OpenError) Is(target error) bool {
	switch target {
	case ErrNoDevice:
		for _, err := range e.Tried {
			if errors.Is(err, ErrNoDevice) {
				return true
			}
		}
	case ErrLibraryNotFound:
		for _, err := range e.Tried {
			if !errors.Is(err, ErrLibraryNotFound) {
				return false
			}
		}
		return len(e.Tried) > 0
	}
	return false
}
