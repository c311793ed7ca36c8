package managed

// The advice of moves: which calls a move sends and in what order, that a
// move to the host advises no accessed-by device, that readers survive
// moves, and that a freed buffer's block carries only its pool's hints.

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

// wantAccessedBy fails unless the recorded accessed-by advice left on
// [p, p+size) names exactly the devices devs.
func wantAccessedBy(t *testing.T, r *recorder, what string, p gpumem.Ptr, size uint64, devs ...int) {
	t.Helper()
	acc := r.accessedBy(p, size)
	ok := len(acc) == len(devs)
	for _, d := range devs {
		ok = ok && acc[gpumem.DeviceLocation(d)]
	}
	if !ok {
		t.Fatalf("%s: accessed by %v, want devices %v", what, acc, devs)
	}
}

// wantOps fails unless the advice and prefetches recorded since the last
// takeOps are want, in order.
func wantOps(t *testing.T, r *recorder, what string, want ...string) {
	t.Helper()
	if got := r.takeOps(); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("%s calls:\n got  %q\n want %q", what, got, want)
	}
}

// TestMoveOrderAndMinimalAdvice checks that a move to a device queues its
// prefetch before it advises and a move to the host advises first, that
// only the advice that changes is sent, and that a move leaves its advice
// in effect: the preferred location, and no accessed-by device.
func TestMoveOrderAndMinimalAdvice(t *testing.T) {
	r, a := setup(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}}, Options{})
	b, err := a.Alloc(8*mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	dev1 := gpumem.DeviceLocation(1)
	steps := []struct {
		to   gpumem.Location
		ops  []string
		pref gpumem.Location
	}{
		{dev1, []string{"prefetch " + dev1.String(), "set_preferred_location " + dev1.String()}, dev1},
		{host, []string{"set_preferred_location " + host.String(), "prefetch " + host.String()}, host},
		{dev0, []string{"prefetch " + dev0.String(), "set_preferred_location " + dev0.String()}, dev0},
		{host, []string{"set_preferred_location " + host.String(), "prefetch " + host.String()}, host},
	}
	r.takeOps()
	for _, st := range steps {
		if _, err := b.To(st.to, ToOptions{Stream: s0}); err != nil {
			t.Fatalf("To(%v): %v", st.to, err)
		}
		if err := r.StreamSynchronize(s0); err != nil {
			t.Fatal(err)
		}
		wantOps(t, r, "To("+st.to.String()+")", st.ops...)
		if loc, err := r.RangeLocation(b.Ptr, b.Size, gpumem.RangePreferredLocation); err != nil || loc != st.pref {
			t.Fatalf("after To(%v) preferred location %v (%v), want %v", st.to, loc, err, st.pref)
		}
		if loc, err := r.RangeLocation(b.Ptr, b.Size, gpumem.RangeLastPrefetchLocation); err != nil || loc != st.to {
			t.Fatalf("after To(%v) last prefetch location %v (%v)", st.to, loc, err)
		}
		wantAccessedBy(t, r, "after To("+st.to.String()+")", b.Ptr, b.Size)
		if err := a.VerifyResidency(); err != nil {
			t.Fatal(err)
		}
	}
	// Freed at the host: the pool's hints come back with one
	// preferred-location advice, nothing repeated.
	p := b.Ptr
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	wantOps(t, r, "Free", "set_preferred_location "+dev0.String())
	wantAccessedBy(t, r, "freed block", p, 8*mib)
}

// TestMoveToHostAdvisesNoAccessedBy checks that no move to the host sets
// accessed-by advice: from a device-pool buffer on either device, from a
// host-pool buffer that went to a device, on a device that cannot migrate
// pages, and without blocking. A host-pool buffer's own accessed-by (its
// pool's hint) is unset by the move away from the host and stays unset.
func TestMoveToHostAdvisesNoAccessedBy(t *testing.T) {
	for _, noMigrate := range []bool{false, true} {
		r := newRecorder(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}})
		r.noMigrate = noMigrate
		a := newAlloc(t, r, r, Options{})
		s1 := gpumem.Stream{Device: 1}
		dev1 := gpumem.DeviceLocation(1)
		d, err := a.Alloc(8*mib, dev1, s1)
		if err != nil {
			t.Fatal(err)
		}
		h, err := a.Alloc(8*mib, host, s0)
		if err != nil {
			t.Fatal(err)
		}
		moves := []struct {
			b  *Buffer
			to gpumem.Location
			nb bool
		}{
			{d, host, false}, {d, dev0, false}, {d, host, true}, {d, dev1, false}, {d, host, false},
			{h, dev1, false}, {h, host, false}, {h, dev0, false}, {h, host, true},
		}
		r.takeOps()
		for _, m := range moves {
			if _, err := m.b.To(m.to, ToOptions{Stream: s0, NonBlocking: m.nb}); err != nil {
				t.Fatalf("noMigrate %v: To(%v): %v", noMigrate, m.to, err)
			}
			if err := r.StreamSynchronize(s0); err != nil {
				t.Fatal(err)
			}
			for _, op := range r.takeOps() {
				if strings.HasPrefix(op, "set_accessed_by") {
					t.Fatalf("noMigrate %v: To(%v) of %v sent %q", noMigrate, m.to, m.b, op)
				}
			}
			what := "after To(" + m.to.String() + ")"
			wantAccessedBy(t, r, what, m.b.Ptr, m.b.Size)
			if loc, err := r.RangeLocation(m.b.Ptr, m.b.Size, gpumem.RangePreferredLocation); err != nil || loc != m.to {
				t.Fatalf("noMigrate %v: %s preferred location %v (%v)", noMigrate, what, loc, err)
			}
		}
		if c := r.calls(d.Ptr, d.Size, gpumem.AdviseSetAccessedBy); len(c) != 0 {
			t.Fatalf("noMigrate %v: device buffer got accessed-by advice %v", noMigrate, c)
		}
		// The host-pool buffer's only accessed-by advice is its pool's hint.
		if c := r.calls(h.Ptr, h.Size, gpumem.AdviseSetAccessedBy); len(c) != 1 || c[0].loc != dev0 {
			t.Fatalf("noMigrate %v: host buffer accessed-by advice %v, want its pool's hint alone", noMigrate, c)
		}
		if err := a.VerifyResidency(); err != nil {
			t.Fatal(err)
		}
		if err := d.Free(); err != nil {
			t.Fatal(err)
		}
		if err := h.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMovesKeepReaders checks that a move, to the host or to a device, never
// drops the accessed-by advice of a reader, including a reader that is also
// the device of the host pool's hint, and that a reader that was the
// placement's accessed-by device is unset by RemoveReader once a move has
// dropped it from the placement.
func TestMovesKeepReaders(t *testing.T) {
	r, a := setup(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}}, Options{})
	dev1 := gpumem.DeviceLocation(1)
	d, err := a.Alloc(8*mib, dev0, s0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Alloc(8*mib, host, s0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.AddReader(1); err != nil {
		t.Fatal(err)
	}
	// Device 0 is already advised for h by its pool; device 1 is new.
	if err := h.AddReader(0); err != nil {
		t.Fatal(err)
	}
	if err := h.AddReader(1); err != nil {
		t.Fatal(err)
	}
	r.takeOps()
	for _, to := range []gpumem.Location{host, dev1, host, dev0, host} {
		for _, b := range []*Buffer{d, h} {
			if _, err := b.To(to, ToOptions{Stream: s0}); err != nil {
				t.Fatalf("To(%v): %v", to, err)
			}
		}
		if err := r.StreamSynchronize(s0); err != nil {
			t.Fatal(err)
		}
		for _, op := range r.takeOps() {
			if strings.HasPrefix(op, "unset_accessed_by") || strings.HasPrefix(op, "set_accessed_by") {
				t.Fatalf("To(%v) of buffers whose accessed-by devices are all readers sent %q", to, op)
			}
		}
		what := "after To(" + to.String() + ")"
		wantAccessedBy(t, r, what+", device buffer", d.Ptr, d.Size, 1)
		wantAccessedBy(t, r, what+", host buffer", h.Ptr, h.Size, 0, 1)
		if got := h.Readers(); len(got) != 2 {
			t.Fatalf("%s readers %v", what, got)
		}
	}
	// Moved away and back, h's advice of device 0 is the reader's alone.
	if err := h.RemoveReader(0); err != nil {
		t.Fatal(err)
	}
	wantAccessedBy(t, r, "host buffer after RemoveReader(0)", h.Ptr, h.Size, 1)
	if err := d.RemoveReader(1); err != nil {
		t.Fatal(err)
	}
	wantAccessedBy(t, r, "device buffer after RemoveReader(1)", d.Ptr, d.Size)
	// Freed: readers dropped, the pools' hints back.
	hp, dp := h.Ptr, d.Ptr
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	wantAccessedBy(t, r, "freed host-pool block", hp, 8*mib, 0)
	wantAccessedBy(t, r, "freed device-pool block", dp, 8*mib)
}

// TestFreedMovedHostBufferRestoresHints checks that a host-pool buffer
// moved to a device and back to the host (which leaves it with no
// accessed-by device) gets its pool's accessed-by hint back when freed, so
// that the next buffer the pool hands out from the block carries its pool's
// hints, and that the new buffer knows it: a free without a move sends
// nothing, and a move to the device unsets the hint.
func TestFreedMovedHostBufferRestoresHints(t *testing.T) {
	r, a := setup(t, sim.Config{}, Options{})
	b, err := a.Alloc(8*mib, host, s0)
	if err != nil {
		t.Fatal(err)
	}
	p := b.Ptr
	r.takeOps()
	if _, err := b.To(dev0, ToOptions{Stream: s0}); err != nil {
		t.Fatal(err)
	}
	wantOps(t, r, "To(device 0)", "prefetch "+dev0.String(), "set_preferred_location "+dev0.String(), "unset_accessed_by "+dev0.String())
	if _, err := b.To(host, ToOptions{Stream: s0}); err != nil {
		t.Fatal(err)
	}
	wantOps(t, r, "To(host)", "set_preferred_location "+host.String(), "prefetch "+host.String())
	wantAccessedBy(t, r, "moved back to the host", p, b.Size)
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	wantOps(t, r, "Free", "set_accessed_by "+dev0.String())
	wantAccessedBy(t, r, "freed block", p, 8*mib, 0)

	nb, err := a.Alloc(8*mib, host, s0)
	if err != nil {
		t.Fatal(err)
	}
	if nb.Ptr != p {
		t.Fatalf("the pool handed out %#x, not the cached block %#x", uintptr(nb.Ptr), uintptr(p))
	}
	wantOps(t, r, "cache hit")
	wantAccessedBy(t, r, "block handed out again", nb.Ptr, nb.Size, 0)
	if loc, err := r.RangeLocation(nb.Ptr, nb.Size, gpumem.RangePreferredLocation); err != nil || loc != host {
		t.Fatalf("block handed out again prefers %v (%v), want host", loc, err)
	}
	if _, err := nb.To(dev0, ToOptions{Stream: s0}); err != nil {
		t.Fatal(err)
	}
	wantOps(t, r, "To(device 0) of the new buffer", "prefetch "+dev0.String(), "set_preferred_location "+dev0.String(), "unset_accessed_by "+dev0.String())
	if _, err := nb.To(host, ToOptions{Stream: s0}); err != nil {
		t.Fatal(err)
	}
	r.takeOps()

	// Restoring the hint fails: the block is advised again when it is
	// handed out next.
	r.InjectFault("Advise", 1, errInjected)
	if err := nb.Free(); !errors.Is(err, errInjected) {
		t.Fatalf("Free with the restoring advice failing: %v", err)
	}
	r.ClearFaults()
	wantAccessedBy(t, r, "freed block, restore failed", p, 8*mib)
	again, err := a.Alloc(8*mib, host, s0)
	if err != nil {
		t.Fatal(err)
	}
	if again.Ptr != p {
		t.Fatalf("the pool handed out %#x, not the cached block %#x", uintptr(again.Ptr), uintptr(p))
	}
	wantAccessedBy(t, r, "block handed out after a failed restore", p, 8*mib, 0)
	if err := again.Free(); err != nil {
		t.Fatal(err)
	}

	// A host-pool buffer that never moved is freed with no advice.
	r.takeOps()
	c, err := a.Alloc(8*mib, host, s0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
	for _, op := range r.takeOps() {
		if !strings.HasPrefix(op, "set_preferred_location") && !strings.HasPrefix(op, "set_accessed_by") {
			t.Fatalf("unmoved host buffer: unexpected call %q", op)
		}
	}
	wantAccessedBy(t, r, "unmoved host buffer freed", c.Ptr, 8*mib, 0)
}

// TestMoveAdviceFailureKeepsPlacement checks that a move to a device whose
// advice fails after its prefetch was queued restores the old advice and
// sends the pages back, so that the buffer keeps its placement and the
// driver agrees. The buffer comes from the host pool, so that the move
// sends two pieces of advice (the preferred location, and the unset of the
// pool's accessed-by hint) and each can fail.
func TestMoveAdviceFailureKeepsPlacement(t *testing.T) {
	for nth := 1; nth <= 2; nth++ {
		r, a := setup(t, sim.Config{}, Options{})
		b, err := a.Alloc(8*mib, host, s0)
		if err != nil {
			t.Fatal(err)
		}
		data := pattern(int(b.Size), 9)
		if err := r.CopyToDevice(b.Ptr, data); err != nil {
			t.Fatal(err)
		}
		if err := r.Prefetch(b.Ptr, b.Size, host, s0); err != nil {
			t.Fatal(err)
		}
		r.takeOps()
		r.InjectFault("Advise", nth, errInjected)
		if _, err := b.To(dev0, ToOptions{Stream: s0}); !errors.Is(err, errInjected) {
			t.Fatalf("advice fault %d: To returned %v", nth, err)
		}
		r.ClearFaults()
		if ops := r.takeOps(); len(ops) == 0 || ops[0] != "prefetch "+dev0.String() || ops[len(ops)-1] != "prefetch "+host.String() {
			t.Fatalf("advice fault %d: calls %q, want the prefetch first and one back last", nth, ops)
		}
		if err := r.StreamSynchronize(s0); err != nil {
			t.Fatal(err)
		}
		if b.Location() != host || a.Residency()[host] != b.Size {
			t.Fatalf("advice fault %d: location %v, residency %v", nth, b.Location(), a.Residency())
		}
		if err := a.VerifyResidency(); err != nil {
			t.Fatalf("advice fault %d: %v", nth, err)
		}
		if loc, err := r.RangeLocation(b.Ptr, b.Size, gpumem.RangePreferredLocation); err != nil || loc != host {
			t.Fatalf("advice fault %d: preferred location %v (%v)", nth, loc, err)
		}
		if sr := r.Residency(b.Ptr, b.Size); sr[host] != b.Size {
			t.Fatalf("advice fault %d: pages at %v", nth, sr)
		}
		// The pool's hint is still in effect (never unset, or set again).
		wantAccessedBy(t, r, "after the failed move", b.Ptr, b.Size, 0)
		got := make([]byte, b.Size)
		if err := r.CopyFromDevice(got, b.Ptr); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("advice fault %d: data changed (%v)", nth, err)
		}
		// The next move works and unsets the hint.
		if _, err := b.To(dev0, ToOptions{Stream: s0}); err != nil {
			t.Fatal(err)
		}
		wantAccessedBy(t, r, "after the next move", b.Ptr, b.Size)
		if err := a.VerifyResidency(); err != nil {
			t.Fatal(err)
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
	}
}
