package gpumem

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// DefaultAllocator is the allocator a configuration without a backend key
// asks for, as PyTorch's native caching allocator is its default.
const DefaultAllocator = "caching"

// AllocatorInfo registers an allocator under a name, so that a program (or
// the gpumem tool) can build the allocator a configuration asks for without
// naming its package.
type AllocatorInfo struct {
	// Name is the allocator's name, the value of the configuration's
	// backend key ("caching", "asyncpool", "managed").
	Name string
	// New builds the allocator on b from a configuration string in
	// GPUMEM_ALLOC_CONF syntax whose backend key is absent or Name. It
	// rejects the keys that do not apply to it, naming them.
	New func(b Backend, conf string) (Allocator, error)
	// Enabled reports whether the allocator is on when a program runs every
	// allocator without naming it (nil: always); when it is off, the reason
	// says how to turn it on. An allocator named explicitly is always built.
	Enabled func() (on bool, reason string)
	// Doc is a one-line description.
	Doc string
}

var (
	allocMu  sync.Mutex
	allocReg = map[string]AllocatorInfo{}
)

// RegisterAllocator makes an allocator available by name. Allocator
// packages call it from init; registering a name again replaces it. An
// empty name or a nil New panics (a programming error at init).
func RegisterAllocator(info AllocatorInfo) {
	if info.Name == "" || info.New == nil {
		panic("gpumem: RegisterAllocator: empty name or nil New")
	}
	allocMu.Lock()
	defer allocMu.Unlock()
	allocReg[info.Name] = info
}

// Allocators lists the registered allocators, sorted by name.
func Allocators() []AllocatorInfo {
	allocMu.Lock()
	defer allocMu.Unlock()
	out := make([]AllocatorInfo, 0, len(allocReg))
	for _, info := range allocReg {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// allocatorNames lists the registered names, sorted.
func allocatorNames() []string {
	infos := Allocators()
	names := make([]string, len(infos))
	for i, info := range infos {
		names[i] = info.Name
	}
	return names
}

// NewAllocator builds the allocator that conf (GPUMEM_ALLOC_CONF syntax)
// asks for with its backend key (DefaultAllocator when absent) on b. An
// allocator that is not linked into the program is an error matching
// ErrInvalidValue that lists those that are (import
// github.com/gpumem/gpumem/all to link them all).
func NewAllocator(b Backend, conf string) (Allocator, error) {
	name, err := confAllocator(conf)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = DefaultAllocator
	}
	return newAllocator(b, name, conf)
}

// NewAllocatorFromEnv builds the allocator that GPUMEM_ALLOC_CONF asks for
// (the default allocator, with its defaults, when it is unset).
func NewAllocatorFromEnv(b Backend) (Allocator, error) {
	a, err := NewAllocator(b, allocConfFromEnv())
	if err != nil {
		return nil, ConfFrom(err, AllocConfEnv)
	}
	return a, nil
}

// NewNamedAllocator builds the allocator registered under name on b from
// conf. A backend key in conf must be absent or name the same allocator; the
// allocator sees conf with its own name as the backend key.
func NewNamedAllocator(b Backend, name, conf string) (Allocator, error) {
	key, err := confAllocator(conf)
	if err != nil {
		return nil, err
	}
	switch key {
	case name:
	case "":
		if strings.TrimSpace(conf) == "" {
			conf = "backend:" + name
		} else {
			conf = "backend:" + name + "," + conf
		}
	default:
		return nil, &ConfError{Key: "backend", Value: key, Reason: fmt.Sprintf("names another allocator than %q", name)}
	}
	return newAllocator(b, name, conf)
}

func newAllocator(b Backend, name, conf string) (Allocator, error) {
	allocMu.Lock()
	info, ok := allocReg[name]
	allocMu.Unlock()
	if !ok {
		return nil, &ConfError{Key: "backend", Value: name,
			Reason: fmt.Sprintf("no such allocator in this program (linked in: %s)", strings.Join(allocatorNames(), ", "))}
	}
	if b == nil {
		return nil, fmt.Errorf("gpumem: allocator %s: nil backend: %w", name, ErrInvalidValue)
	}
	a, err := info.New(b, conf)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fmt.Errorf("gpumem: allocator %s: its constructor returned nothing: %w", name, ErrInvalidValue)
	}
	return a, nil
}
