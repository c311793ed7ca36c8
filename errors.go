package gpumem

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error the project returns matches at most one of
// them with errors.Is, and wraps its cause.
var (
	// ErrOutOfMemory: the device, the pool or an allocator's cap has no room.
	ErrOutOfMemory = errors.New("gpumem: out of memory")
	// ErrNotSupported: the vendor, its version or the device lacks the operation.
	ErrNotSupported = errors.New("gpumem: not supported")
	// ErrNoDevice: the library loaded but reports no usable device.
	ErrNoDevice = errors.New("gpumem: no device")
	// ErrLibraryNotFound: no candidate library could be loaded.
	ErrLibraryNotFound = errors.New("gpumem: library not found")
	// ErrInvalidValue: a bad argument (size, pointer, handle, configuration).
	ErrInvalidValue = errors.New("gpumem: invalid value")
	// ErrClosed: the backend or allocator was closed.
	ErrClosed = errors.New("gpumem: closed")
)

// Error is a failure reported by a vendor library (or the simulator, which
// speaks the same way).
type Error struct {
	Backend string // "cuda", "hip", "sim"
	Op      string // the vendor symbol or operation, e.g. "cuMemAlloc_v2"
	Code    int    // the vendor status code
	Name    string // the vendor's name for Code, from the library (cuGetErrorName / hipGetErrorName)
	Err     error  // the sentinel Code maps to, or nil
}

// Error formats the error as "gpumem: cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)".
func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "unknown error"
	}
	return fmt.Sprintf("gpumem: %s: %s: %s (%d)", e.Backend, e.Op, name, e.Code)
}

// Unwrap returns the sentinel the vendor code maps to.
func (e *Error) Unwrap() error { return e.Err }

// NotSupportedError says which operation is missing and why.
type NotSupportedError struct {
	Backend string
	Op      string
	Reason  string // e.g. "symbol cuMemAdvise_v2 not exported by libcuda.so.1"
}

// Error formats the error.
func (e *NotSupportedError) Error() string {
	return fmt.Sprintf("gpumem: %s: %s not supported: %s", e.Backend, e.Op, e.Reason)
}

// Is matches ErrNotSupported.
func (e *NotSupportedError) Is(target error) bool { return target == ErrNotSupported }

// LoadAttempt is one candidate library that failed to load and the dynamic
// loader's reason.
type LoadAttempt struct {
	Name    string // the candidate as given
	Message string // the dlopen error message
}

// LoadError is what Open returns (wrapped with the backend's name) when no
// candidate library could be loaded. It matches ErrLibraryNotFound.
type LoadError struct {
	Tried []LoadAttempt
}

// Error lists every candidate tried with the loader's message for it.
func (e *LoadError) Error() string {
	if len(e.Tried) == 0 {
		return "dl: no library candidates given"
	}
	var b strings.Builder
	b.WriteString("dl: cannot load ")
	for i, a := range e.Tried {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Name)
		b.WriteString(": ")
		b.WriteString(a.Message)
	}
	return b.String()
}

// Is matches ErrLibraryNotFound.
func (e *LoadError) Is(target error) bool { return target == ErrLibraryNotFound }

// MissingSymbolsError is what Open returns when a library lacks symbols its
// backend cannot work without (the library is too old, or is not the
// vendor's). It matches ErrNotSupported.
type MissingSymbolsError struct {
	Backend string   // "cuda", "hip"
	Library string   // the library file as it was opened
	Symbols []string // the missing symbols, in table order
}

// Error names every missing symbol.
func (e *MissingSymbolsError) Error() string {
	return fmt.Sprintf("gpumem: %s: %s lacks required symbols %v", e.Backend, e.Library, e.Symbols)
}

// Is matches ErrNotSupported.
func (e *MissingSymbolsError) Is(target error) bool { return target == ErrNotSupported }

// OutOfMemoryError is what allocators return when they cannot satisfy a
// request. It says what PyTorch's out-of-memory message says.
type OutOfMemoryError struct {
	Allocator string // "caching", "asyncpool", "managed", ...
	Device    int
	Requested uint64 // bytes asked for
	Capacity  uint64 // device total memory
	Free      uint64 // device free memory as the driver reports it
	Allocated uint64 // bytes this allocator has handed out
	Reserved  uint64 // bytes this allocator holds from the device
	Largest   uint64 // largest block it could still hand out without asking the device
	Limit     uint64 // a software cap in force (memory fraction), 0 if none
	Hint      string // which setting would help
	Err       error  // the underlying failure, if any (a vendor *Error)
	// Stats are the allocator's statistics for Device when it failed (nil
	// when it keeps none): what Summary prints.
	Stats *MemoryStats
	// Others is what other processes held on Device when it failed, as the
	// device's telemetry reported it (NoteOtherProcesses); nil when no
	// telemetry was at hand.
	Others *OtherProcessesMemory
}

// Summary returns the memory summary of the failing device at the failure,
// as torch.cuda.memory_summary prints it (MemorySummary of Stats), for an
// out-of-memory log: the error's one line says what was asked and held, the
// summary the full picture. When the other processes' memory is known
// (Others), a line after the table says what they hold. It is "" when the
// allocator gave no statistics and nothing is known of other processes.
func (e *OutOfMemoryError) Summary() string {
	s := ""
	if e.Stats != nil {
		s = MemorySummary(*e.Stats, e.Device)
	}
	if e.Others != nil {
		s += fmt.Sprintf("Other processes hold %s on device %d.\n", e.Others, e.Device)
	}
	return s
}

// Error formats the error like PyTorch's OutOfMemoryError.
func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpumem: %s: out of memory: tried to allocate %s on device %d", e.Allocator, FormatBytes(e.Requested), e.Device)
	if e.Capacity > 0 {
		fmt.Fprintf(&b, "; device has a total capacity of %s of which %s is free", FormatBytes(e.Capacity), FormatBytes(e.Free))
	}
	if e.Others != nil {
		fmt.Fprintf(&b, "; other processes hold %s", e.Others)
	}
	fmt.Fprintf(&b, "; this allocator has %s allocated and %s reserved but unallocated",
		FormatBytes(e.Allocated), FormatBytes(sub(e.Reserved, e.Allocated)))
	fmt.Fprintf(&b, "; the largest block it can hand out is %s", FormatBytes(e.Largest))
	if e.Limit > 0 {
		fmt.Fprintf(&b, "; a limit of %s is in force", FormatBytes(e.Limit))
	}
	if e.Hint != "" {
		b.WriteString(". ")
		b.WriteString(e.Hint)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " (cause: %v)", e.Err)
	}
	return b.String()
}

// Is matches ErrOutOfMemory.
func (e *OutOfMemoryError) Is(target error) bool { return target == ErrOutOfMemory }

// Unwrap returns the underlying failure.
func (e *OutOfMemoryError) Unwrap() error { return e.Err }

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// FormatBytes formats a byte count with a binary unit ("1.50 GiB").
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
