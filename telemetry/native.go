package telemetry

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// smi is an initialised vendor library, indexed in its own device order.
type smi interface {
	name() string
	library() string
	count() int
	pci(i int) (pciAddr, bool)
	find(a pciAddr) (int, bool)
	device(i int) (DeviceStats, error)
	processes(i int) ([]Process, error)
	close() error
}

// system is a vendor library as an engine: device dev is the library's
// index idx[dev] (-1: not found), or dev itself when idx is nil.
type system struct {
	smi
	idx []int
}

func openSystem(v bind.Vendor, opts []bind.Option) (*system, error) {
	switch v {
	case bind.CUDA:
		e, err := openNVML(opts)
		if err != nil {
			return nil, err
		}
		return &system{smi: e}, nil
	case bind.HIP:
		e, err := openROCmSMI(opts)
		if err != nil {
			return nil, err
		}
		return &system{smi: e}, nil
	}
	return nil, fmt.Errorf("gpumem: telemetry: unknown vendor %d: %w", int(v), gpumem.ErrInvalidValue)
}

func (s *system) index(dev int) (int, error) {
	if s.idx == nil {
		return dev, nil
	}
	if s.idx[dev] < 0 {
		return 0, &gpumem.NotSupportedError{Backend: s.name(), Op: "telemetry", Reason: fmt.Sprintf("device %d is not among the library's devices", dev)}
	}
	return s.idx[dev], nil
}

func (s *system) device(dev int) (DeviceStats, error) {
	i, err := s.index(dev)
	if err != nil {
		return DeviceStats{}, err
	}
	st, err := s.smi.device(i)
	if s.idx != nil && st.PCIBusID == "" {
		if a, ok := s.smi.pci(i); ok {
			st.PCIBusID = a.String()
		}
	}
	return st, err
}

func (s *system) processes(dev int) ([]Process, error) {
	i, err := s.index(dev)
	if err != nil {
		return nil, err
	}
	return s.smi.processes(i)
}

// mapBackend finds each of b's n devices in the library by its PCI
// address; a device whose address the backend does not tell is taken to be
// the library's device of the same index, and noted.
func (s *system) mapBackend(b gpumem.Backend, n int) (*system, []string, error) {
	var notes []string
	s.idx = make([]int, n)
	for dev := range s.idx {
		a, ok := backendPCI(b, dev)
		if ok {
			if i, found := s.find(a); found {
				s.idx[dev] = i
				continue
			}
			notes = append(notes, fmt.Sprintf("device %d (PCI %s) is not among %s's devices", dev, a, s.name()))
			s.idx[dev] = -1
			continue
		}
		if dev < s.count() {
			notes = append(notes, fmt.Sprintf("device %d: the backend tells no PCI address; %s's device %d is assumed", dev, s.name(), dev))
			s.idx[dev] = dev
		} else {
			notes = append(notes, fmt.Sprintf("device %d: the backend tells no PCI address and %s has %d devices", dev, s.name(), s.count()))
			s.idx[dev] = -1
		}
	}
	return s, notes, nil
}

// backendPCI is device dev's PCI address as backend b tells it.
func backendPCI(b gpumem.Backend, dev int) (pciAddr, bool) {
	bus, err1 := b.DeviceAttribute(dev, gpumem.AttrPCIBusID)
	slot, err2 := b.DeviceAttribute(dev, gpumem.AttrPCIDeviceID)
	if err1 != nil || err2 != nil || bus < 0 || slot < 0 {
		return pciAddr{}, false
	}
	dom, err := b.DeviceAttribute(dev, gpumem.AttrPCIDomainID)
	if err != nil || dom < 0 {
		dom = 0
	}
	return pciAddr{domain: uint32(dom), bus: uint32(bus), dev: uint32(slot)}, true
}

// pciBusID formats device dev's PCI address as backend b tells it ("" if
// it does not).
func pciBusID(b gpumem.Backend, dev int) string {
	if a, ok := backendPCI(b, dev); ok {
		return a.String()
	}
	return ""
}
