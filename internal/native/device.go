package native

import (
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// DeviceCount returns the number of devices.
func (b *Backend) DeviceCount() (int, error) {
	if b.closed.Load() {
		return 0, b.closedErr()
	}
	return b.nDev, nil
}

// DeviceName returns the device's name.
func (b *Backend) DeviceName(dev int) (string, error) {
	if uint(dev) >= uint(b.nDev) {
		return "", b.badDevice(dev)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.DeviceName, c.addr(0), 100, uintptr(b.handle[dev]), 0, 0, 0); err != nil {
		return "", err
	}
	buf := c.bytes()[:100]
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return string(buf[:n]), nil
}

// DeviceAttribute reads a device attribute.
func (b *Backend) DeviceAttribute(dev int, a gpumem.Attribute) (int, error) {
	if uint(dev) >= uint(b.nDev) {
		return 0, b.badDevice(dev)
	}
	v, ok := b.d.Attribute(b, a)
	if !ok {
		return 0, &gpumem.NotSupportedError{Backend: b.d.Name, Op: "DeviceAttribute", Reason: fmt.Sprintf("attribute %s has no %s equivalent in this library version", a, b.d.Name)}
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.DeviceAttribute, c.addr(0), uintptr(v), uintptr(b.handle[dev]), 0, 0, 0); err != nil {
		return 0, err
	}
	return int(c.i32(0)), nil
}

// MemInfo reports the device's free and total memory.
func (b *Backend) MemInfo(dev int) (free, total uint64, err error) {
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.MemInfo, c.addr(0), c.addr(1), 0, 0, 0, 0); err != nil {
		return 0, 0, err
	}
	return c[0], c[1], nil
}

// DeviceSynchronize waits for all work on the device.
func (b *Backend) DeviceSynchronize(dev int) error {
	return b.call(dev, symtab.DeviceSynchronize, 0, 0, 0, 0, 0, 0)
}

// ManagedPagesMigrate reports whether dev migrates managed pages on demand,
// from the attribute the vendor ties to it (the dialect's
// MigrationAttribute): a gpumem.ManagedMigration capability.
func (b *Backend) ManagedPagesMigrate(dev int) (bool, error) {
	v, err := b.DeviceAttribute(dev, b.d.MigrationAttribute)
	if err != nil {
		return false, fmt.Errorf("gpumem: %s: reading %s: %w", b.d.Name, b.d.MigrationAttribute, err)
	}
	return v != 0, nil
}

// VirtualMemoryDefault reports whether allocators should use the virtual
// memory API by default with the loaded library (a gpumem.VirtualMemoryAdvisor
// capability), and why not.
func (b *Backend) VirtualMemoryDefault() (bool, string) {
	if b.d.VirtualMemoryDefault == nil {
		return true, ""
	}
	return b.d.VirtualMemoryDefault(b)
}

// MapsHandleTwice reports whether a physical allocation may be mapped at a
// second address while mapped at a first (a gpumem.MappingAliaser
// capability): yes unless the dialect says why not.
func (b *Backend) MapsHandleTwice() (bool, string) {
	return b.d.SingleMapping == "", b.d.SingleMapping
}

// DeviceTarget implements gpumem.TargetNamer through the dialect: the
// compile target of device dev.
func (b *Backend) DeviceTarget(dev int) (string, error) {
	if b.closed.Load() {
		return "", b.closedErr()
	}
	if dev < 0 || dev >= b.nDev {
		return "", b.badDevice(dev)
	}
	if b.d.Target == nil {
		return "", &gpumem.NotSupportedError{Backend: b.d.Name, Op: "DeviceTarget", Reason: "the dialect names no compile target"}
	}
	return b.d.Target(b, dev)
}
