package streamcheck

import (
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
)

// checkedSlots is how many streams a Cache remembers as checked: as many as
// a program commonly allocates on at once (the replay uses four).
const checkedSlots = 8

// Cache is Check for one backend that remembers the streams that passed the
// backend's in-process check (gpumem.StreamChecker) while the backend's
// stream epoch had one value, so that a check of a stream already checked
// (an allocator's cache hit) costs three atomic loads instead of a call. Any
// destroyed stream (or a closed backend) moves the epoch, which forgets them
// all. A backend that is not a StreamChecker is asked every time, as Check
// does. The zero Cache is not usable: Init it before use, and do not copy it.
//
// Readers take no lock: they load the epoch the slots belong to, compare it
// with the backend's, and scan the slots. A writer (a stream checked anew)
// takes mu, clears the slots before it publishes a new epoch, so that a
// reader that sees the new epoch never finds a slot of the old one.
type Cache struct {
	b       gpumem.Backend
	sc      gpumem.StreamChecker // b, when it checks streams in process (resolved once: no assertion per call)
	backend *atomic.Uint64       // sc's StreamEpoch
	epoch   atomic.Uint64        // the backend epoch the slots were filled at, +1 (0: none)
	slots   [checkedSlots]atomic.Uint64
	mu      sync.Mutex // writers
	next    int        // the slot the next writer fills (mu)
}

// key packs a stream into one word: the handle with the device above it.
// Handles at or above 2^56 (never a pointer a process is given) are not
// remembered.
func key(s gpumem.Stream) (uint64, bool) {
	h := uint64(s.Handle)
	if h>>56 != 0 || s.Device < 0 || s.Device >= 255 {
		return 0, false
	}
	return h | uint64(s.Device+1)<<56, true
}

// Init makes c check the streams of b.
func (c *Cache) Init(b gpumem.Backend) {
	c.b = b
	if c.sc, _ = b.(gpumem.StreamChecker); c.sc != nil {
		c.backend = c.sc.StreamEpoch()
	}
}

// Check is Check(b, s) for c's backend b, answered from memory for a stream
// that passed it since the backend's stream epoch last moved.
func (c *Cache) Check(s gpumem.Stream) error {
	if c.sc == nil {
		return Check(c.b, s)
	}
	if c.Known(s) {
		return nil
	}
	e := c.backend.Load() + 1
	err := c.sc.CheckStream(s)
	if err == nil {
		c.remember(s, e)
	}
	return err
}

// Known reports whether s was checked at the backend's current epoch.
func (c *Cache) Known(s gpumem.Stream) bool {
	k, ok := key(s)
	if !ok {
		return false
	}
	e := c.backend.Load() + 1
	if c.epoch.Load() != e {
		return false
	}
	for i := range c.slots {
		if c.slots[i].Load() == k {
			return true
		}
	}
	return false
}

// remember records that s passed a check made while the backend's epoch
// read e-1.
func (c *Cache) remember(s gpumem.Stream, e uint64) {
	k, ok := key(s)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.backend.Load()+1 != e {
		return // a stream went away since the check: it may be this one
	}
	if c.epoch.Load() != e {
		for i := range c.slots {
			c.slots[i].Store(0)
		}
		c.next = 0
		c.epoch.Store(e)
	}
	c.slots[c.next].Store(k)
	c.next = (c.next + 1) % checkedSlots
}
