package native

import (
	"errors"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// CanAccessPeer reports whether dev can access peer's memory.
func (b *Backend) CanAccessPeer(dev, peer int) (bool, error) {
	if uint(dev) >= uint(b.nDev) {
		return false, b.badDevice(dev)
	}
	if uint(peer) >= uint(b.nDev) {
		return false, b.badDevice(peer)
	}
	c := getCell()
	defer putCell(c)
	if err := b.call(dev, symtab.CanAccessPeer, c.addr(0), uintptr(b.handle[dev]), uintptr(b.handle[peer]), 0, 0, 0); err != nil {
		return false, err
	}
	return c.i32(0) != 0, nil
}

// EnablePeerAccess lets dev access peer's memory.
func (b *Backend) EnablePeerAccess(dev, peer int) error {
	if uint(peer) >= uint(b.nDev) {
		return b.badDevice(peer)
	}
	err := b.call(dev, symtab.EnablePeerAccess, b.cur[peer], 0, 0, 0, 0, 0)
	var ve *gpumem.Error
	if errors.As(err, &ve) && ve.Code == StatusPeerAlreadyEnabled {
		return nil
	}
	return err
}

// DisablePeerAccess revokes dev's access to peer's memory.
func (b *Backend) DisablePeerAccess(dev, peer int) error {
	if uint(peer) >= uint(b.nDev) {
		return b.badDevice(peer)
	}
	return b.call(dev, symtab.DisablePeerAccess, b.cur[peer], 0, 0, 0, 0, 0)
}
