package rtc

import (
	"fmt"
	"strings"

	"github.com/gpumem/gpumem"
)

// errNil is the error of method op on a nil *Compiler (what a failed Open
// returns).
func errNil(op string) error {
	return fmt.Errorf("rtc: %s on a nil compiler: %w", op, gpumem.ErrInvalidValue)
}

// CompileError is a compile that failed: the source does not compile. Log is
// the compiler's log, which names the lines at fault. It matches
// gpumem.ErrInvalidValue.
type CompileError struct {
	Compiler string // "nvrtc 11.8"
	Program  string // Request.Name
	Target   string
	Log      string
}

// Error names the program and the target and ends with the compiler's log.
func (e *CompileError) Error() string {
	return fmt.Sprintf("rtc: %s: %s does not compile for %s:\n%s", e.Compiler, e.Program, e.Target, strings.TrimRight(e.Log, "\n"))
}

// Is matches gpumem.ErrInvalidValue.
func (e *CompileError) Is(target error) bool { return target == gpumem.ErrInvalidValue }

// TargetError is a target the loaded compiler does not support, refused
// before the compiler is called. It matches gpumem.ErrNotSupported.
type TargetError struct {
	Compiler  string   // "hiprtc 5.2"
	Target    string   // as asked
	Supported []string // what the compiler supports
	Source    string   // where Supported comes from: nvrtcGetSupportedArchs, or the targets table
}

// Error names the target and what the compiler supports.
func (e *TargetError) Error() string {
	return fmt.Sprintf("rtc: %s does not support target %s (supported, from %s: %s)",
		e.Compiler, e.Target, e.Source, strings.Join(e.Supported, " "))
}

// Is matches gpumem.ErrNotSupported.
func (e *TargetError) Is(target error) bool { return target == gpumem.ErrNotSupported }

// LibraryError is a compiler library that could not be opened: none of the
// files tried loaded, or the one that loaded lacks the compiler's functions.
// It matches gpumem.ErrNotSupported (the vendor cannot compile here) and,
// through Err (a *gpumem.LoadError naming every file tried and why),
// gpumem.ErrLibraryNotFound.
type LibraryError struct {
	Compiler string // "nvrtc", "hiprtc"
	Err      error
}

// Error names the compiler and every file tried.
func (e *LibraryError) Error() string {
	return fmt.Sprintf("rtc: no %s compiler library: %v", e.Compiler, e.Err)
}

// Is matches gpumem.ErrNotSupported.
func (e *LibraryError) Is(target error) bool { return target == gpumem.ErrNotSupported }

// Unwrap returns the load error.
func (e *LibraryError) Unwrap() error { return e.Err }

// Error is a compiler function that returned a status other than success
// (and other than a compile error, which is a *CompileError). It matches
// gpumem.ErrOutOfMemory or gpumem.ErrInvalidValue where the status means
// that.
type Error struct {
	Compiler string // "nvrtc 11.8"
	Op       string // the vendor symbol, e.g. "nvrtcGetLoweredName"
	Code     int
	Name     string // the library's string for Code
}

// Error formats the error as "rtc: nvrtc 11.8: nvrtcCreateProgram: NVRTC_ERROR_INVALID_INPUT (3)".
func (e *Error) Error() string {
	return fmt.Sprintf("rtc: %s: %s: %s (%d)", e.Compiler, e.Op, e.Name, e.Code)
}

// Is matches the sentinel the status means.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case 1:
		return target == gpumem.ErrOutOfMemory
	case 3, 4, 5, 8, 9, 10:
		return target == gpumem.ErrInvalidValue
	}
	return false
}
