package gpumem

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// ProcessMemory is one process's memory on a device.
type ProcessMemory struct {
	PID   int
	Bytes uint64
}

// OtherProcessesMemory is the device memory other processes held when an
// allocation failed, as the device's telemetry (NVML, ROCm SMI, the
// simulator's accounting) reported it.
type OtherProcessesMemory struct {
	Bytes     uint64          // in all
	Processes []ProcessMemory // each, as the telemetry listed them
}

// String says what the other processes hold: "2.00 GiB (process 4242:
// 2.00 GiB)", the first few processes named.
func (m *OtherProcessesMemory) String() string {
	if m == nil {
		return "unknown"
	}
	var b strings.Builder
	b.WriteString(FormatBytes(m.Bytes))
	const named = 4
	for i, p := range m.Processes {
		if i == named {
			fmt.Fprintf(&b, ", and %d more", len(m.Processes)-named)
			break
		}
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "process %d: %s", p.PID, FormatBytes(p.Bytes))
	}
	if len(m.Processes) > 0 {
		b.WriteString(")")
	}
	return b.String()
}

// OtherProcessesFunc reports the memory other processes hold on device dev
// of backend b.
type OtherProcessesFunc func(b Backend, dev int) (*OtherProcessesMemory, error)

var otherProcesses atomic.Pointer[OtherProcessesFunc]

// SetOtherProcessesFunc installs the function allocators ask, when an
// allocation fails, how much other processes hold on the device (nil
// removes it). The telemetry package installs one when it is imported
// (github.com/gpumem/gpumem/telemetry); the root knows no telemetry
// library.
func SetOtherProcessesFunc(f OtherProcessesFunc) {
	if f == nil {
		otherProcesses.Store(nil)
		return
	}
	otherProcesses.Store(&f)
}

// OtherProcesses asks the installed OtherProcessesFunc what other
// processes hold on device dev of b. It is nil when no function is
// installed or it fails (or panics): out-of-memory errors then say nothing
// of other processes. Allocators call it on the out-of-memory path only,
// through NoteOtherProcesses.
func OtherProcesses(b Backend, dev int) (m *OtherProcessesMemory) {
	f := otherProcesses.Load()
	if f == nil || b == nil {
		return nil
	}
	defer func() {
		if recover() != nil {
			m = nil
		}
	}()
	m, err := (*f)(b, dev)
	if err != nil {
		return nil
	}
	return m
}

// NoteOtherProcesses fills e.Others from OtherProcesses(b, e.Device); it
// returns e. Every allocator calls it where it builds its out-of-memory
// error.
func (e *OutOfMemoryError) NoteOtherProcesses(b Backend) *OutOfMemoryError {
	if e != nil && e.Others == nil {
		e.Others = OtherProcesses(b, e.Device)
	}
	return e
}
