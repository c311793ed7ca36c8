package collective

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

// engine is a backend's collectives: the native library, or the
// simulator's engine written in Go.
type engine interface {
	uniqueID() (UniqueID, error)
	initAll(devs []int) ([]commEngine, error)
	initRank(dev, nranks int, id *UniqueID, rank int) (commEngine, error)
	// group runs fn between the library's group start and end, on one OS
	// thread (NCCL's group state is the thread's).
	group(fn func() error) error
}

// engineOf chooses b's engine: the native library for a backend that calls
// a vendor's C library (bind.ContextOf succeeds), the Go engine for the
// simulator.
func engineOf(b gpumem.Backend) (engine, error) {
	if b == nil {
		return nil, fmt.Errorf("collective: nil backend: %w", gpumem.ErrInvalidValue)
	}
	_, err := bind.ContextOf(b, 0)
	if err == nil {
		v, err := vendorOf(b)
		if err != nil {
			return nil, err
		}
		l, err := openLib(v)
		if err != nil {
			return nil, err
		}
		return &native{b: b, l: l}, nil
	}
	if g, ok := b.(*sim.GPU); ok && errors.Is(err, gpumem.ErrNotSupported) {
		return simEngineOf(g), nil
	}
	return nil, fmt.Errorf("collective: backend %s: %w", b.Name(), err)
}

func vendorOf(b gpumem.Backend) (bind.Vendor, error) {
	switch b.Name() {
	case "cuda":
		return bind.CUDA, nil
	case "hip":
		return bind.HIP, nil
	}
	return 0, &gpumem.NotSupportedError{Backend: b.Name(), Op: "collectives", Reason: "no collective library for this backend"}
}

// The libraries opened, one per vendor, for the life of the process.
var libs struct {
	mu sync.Mutex
	l  [bind.NumVendors]*bind.Lib
}

// openLib opens NCCL (CUDA) or RCCL (HIP) once; a failure is retried at the
// next call.
func openLib(v bind.Vendor) (*bind.Lib, error) {
	libs.mu.Lock()
	defer libs.mu.Unlock()
	if l := libs.l[v]; l != nil {
		return l, nil
	}
	lib := NCCL
	if v == bind.HIP {
		lib = RCCL
	}
	l, err := bind.Open(lib, v)
	if err != nil {
		return nil, fmt.Errorf("collective: %w", err)
	}
	libs.l[v] = l
	return l, nil
}

// Version reports the version of b's collective library (NCCL's or RCCL's
// ncclGetVersion, "2.28.3"), or "sim" for the simulator's engine.
func Version(b gpumem.Backend) (string, error) {
	e, err := engineOf(b)
	if err != nil {
		return "", err
	}
	if n, ok := e.(*native); ok {
		return n.l.Version()
	}
	return "sim", nil
}

// NewUniqueID makes the id of a new communicator for InitRank
// (ncclGetUniqueId): one rank makes it and hands it to the others.
func NewUniqueID(b gpumem.Backend) (UniqueID, error) {
	e, err := engineOf(b)
	if err != nil {
		return UniqueID{}, err
	}
	return e.uniqueID()
}

// InitAll makes a communicator of len(devs) ranks in this process, rank i
// on device devs[i] (ncclCommInitAll). The devices must be distinct.
func InitAll(b gpumem.Backend, devs []int) ([]*Comm, error) {
	e, err := engineOf(b)
	if err != nil {
		return nil, err
	}
	if err := checkDevices(b, devs); err != nil {
		return nil, err
	}
	ces, err := e.initAll(devs)
	if err != nil {
		return nil, err
	}
	comms := make([]*Comm, len(devs))
	for i, ce := range ces {
		comms[i] = newComm(ce, b.Name(), len(devs), i, devs[i])
	}
	return comms, nil
}

func checkDevices(b gpumem.Backend, devs []int) error {
	n, err := b.DeviceCount()
	if err != nil {
		return err
	}
	if len(devs) == 0 {
		return fmt.Errorf("collective: InitAll with no devices: %w", gpumem.ErrInvalidValue)
	}
	seen := map[int]bool{}
	for _, d := range devs {
		if d < 0 || d >= n {
			return fmt.Errorf("collective: device %d of %d: %w", d, n, gpumem.ErrInvalidValue)
		}
		if seen[d] {
			return fmt.Errorf("collective: device %d given twice (one rank per device): %w", d, gpumem.ErrInvalidValue)
		}
		seen[d] = true
	}
	return nil
}

// InitRank makes this process's rank of a communicator of nranks ranks
// named by id, on device dev (ncclCommInitRank). It returns when all
// nranks ranks have joined: each rank calls it from its own process, or
// goroutine. On the simulator every rank is a device of one GPU, so nranks
// may not exceed its device count.
func InitRank(b gpumem.Backend, dev, nranks int, id UniqueID, rank int) (*Comm, error) {
	e, err := engineOf(b)
	if err != nil {
		return nil, err
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, err
	}
	switch {
	case dev < 0 || dev >= n:
		return nil, fmt.Errorf("collective: InitRank on device %d of %d: %w", dev, n, gpumem.ErrInvalidValue)
	case nranks < 1 || nranks > 1<<20:
		return nil, fmt.Errorf("collective: InitRank of %d ranks: %w", nranks, gpumem.ErrInvalidValue)
	case rank < 0 || rank >= nranks:
		return nil, fmt.Errorf("collective: rank %d of %d: %w", rank, nranks, gpumem.ErrInvalidValue)
	}
	if _, ok := e.(*simEngine); ok && nranks > n {
		// Every rank is a distinct device of one simulated GPU: more
		// ranks than devices would wait for ever.
		return nil, fmt.Errorf("collective: InitRank of %d ranks on the simulator's %d devices (one rank per device): %w", nranks, n, gpumem.ErrInvalidValue)
	}
	ce, err := e.initRank(dev, nranks, &id, rank)
	if err != nil {
		return nil, err
	}
	return newComm(ce, b.Name(), nranks, rank, dev), nil
}

// Group runs fn, whose calls on communicators of b are issued together
// when it returns (ncclGroupStart, fn, ncclGroupEnd): the calls of one
// goroutine driving several ranks, and sends and receives that must
// progress together. fn runs on the calling goroutine, locked to its OS
// thread; only the calls it makes on that goroutine belong to the group.
// Groups nest. Group returns fn's error joined with the group end's.
// Make communicators (InitRank, InitAll) outside groups.
func Group(b gpumem.Backend, fn func() error) error {
	if fn == nil {
		return fmt.Errorf("collective: Group with a nil function: %w", gpumem.ErrInvalidValue)
	}
	e, err := engineOf(b)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return e.group(fn)
}
