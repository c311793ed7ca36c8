package sim

import "github.com/gpumem/gpumem/internal/symtab"

// peerPossible reports whether device a can access device b per Config.Peer.
func (g *GPU) peerPossible(a, b int) bool {
	if a == b {
		return true
	}
	if a < 0 || b < 0 || a >= len(g.devs) || b >= len(g.devs) {
		return false
	}
	return g.cfg.Peer == nil || g.cfg.Peer(a, b)
}

// CanAccessPeer reports whether dev can access peer's memory (Config.Peer;
// false for a device and itself, as CUDA says).
func (g *GPU) CanAccessPeer(dev, peer int) (bool, error) {
	if err := g.enter(symtab.CanAccessPeer); err != nil {
		return false, err
	}
	if _, err := g.device(symtab.CanAccessPeer, dev); err != nil {
		return false, err
	}
	if _, err := g.device(symtab.CanAccessPeer, peer); err != nil {
		return false, err
	}
	return dev != peer && g.peerPossible(dev, peer), nil
}

// EnablePeerAccess lets kernels on dev access peer's memory. Enabling twice
// is not an error (CUDA's CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED is taken as
// success); devices that cannot access each other fail with
// CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (ErrNotSupported).
func (g *GPU) EnablePeerAccess(dev, peer int) error {
	if err := g.enter(symtab.EnablePeerAccess); err != nil {
		return err
	}
	d, err := g.device(symtab.EnablePeerAccess, dev)
	if err != nil {
		return err
	}
	if _, err := g.device(symtab.EnablePeerAccess, peer); err != nil {
		return err
	}
	if dev == peer {
		return errf(symtab.EnablePeerAccess, symtab.CUDAPeerAccessUnsupported, "a device cannot be its own peer")
	}
	if !g.peerPossible(dev, peer) {
		return errf(symtab.EnablePeerAccess, symtab.CUDAPeerAccessUnsupported, "device %d cannot access device %d", dev, peer)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d.peer[peer] = true
	return nil
}

// DisablePeerAccess revokes what EnablePeerAccess granted; disabling access
// that is not enabled is CUDA_ERROR_PEER_ACCESS_NOT_ENABLED.
func (g *GPU) DisablePeerAccess(dev, peer int) error {
	if err := g.enter(symtab.DisablePeerAccess); err != nil {
		return err
	}
	d, err := g.device(symtab.DisablePeerAccess, dev)
	if err != nil {
		return err
	}
	if _, err := g.device(symtab.DisablePeerAccess, peer); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !d.peer[peer] {
		return errf(symtab.DisablePeerAccess, symtab.CUDAPeerAccessNotEnabled, "device %d has no peer access to %d", dev, peer)
	}
	d.peer[peer] = false
	return nil
}
