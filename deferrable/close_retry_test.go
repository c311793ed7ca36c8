package deferrable_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/deferrable"
)

// TestFailedCloseIsRetried: a Close the device refuses part of says so and
// keeps what was refused (a device free, an event's or the copy stream's
// destroy, a pinned buffer's free); a second Close gives it back, so nothing
// leaks, and a third has nothing to do.
func TestFailedCloseIsRetried(t *testing.T) {
	errRefused := errors.New("refused")
	for _, c := range []struct {
		ops       []string
		recovered bool // Close makes up for the refusal itself
	}{
		{ops: []string{"Free"}}, {ops: []string{"EventDestroy"}}, {ops: []string{"StreamDestroy"}}, {ops: []string{"FreeHost"}},
		// The frees cannot be ordered after the buffers' last uses: they
		// are made after a device synchronization instead, not unordered.
		{ops: []string{"StreamWaitEvent"}, recovered: true},
		// And that synchronization is refused: the frees are kept.
		{ops: []string{"StreamWaitEvent", "DeviceSynchronize"}},
	} {
		ops := c.ops
		t.Run(strings.Join(ops, "+"), func(t *testing.T) {
			g := newSim(t, 1<<30, false)
			s := newStream(t, g)
			base := len(g.Leaks()) // the test's stream
			m := newManager(t, g, deferrable.Options{DiskDir: t.TempDir(), StagingBytes: mib, StagingBuffers: 2})
			// A device buffer with a fence on s (its release recorded an
			// event), one spilled to the pinned host arena, one on disk
			// (the staging ring and its events).
			live, err := m.Alloc(4*mib, s)
			if err != nil {
				t.Fatal(err)
			}
			write(t, g, live, s, pattern(1, 4*mib))
			if _, err := live.AcquireAsync(s); err != nil {
				t.Fatal(err)
			}
			if err := live.ReleaseAsync(s); err != nil {
				t.Fatal(err)
			}
			for tier, n := range map[deferrable.Tier]uint64{deferrable.TierHost: 2 * mib, deferrable.TierDisk: 3 * mib} {
				b, err := m.Alloc(n, s)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.MoveTo(tier); err != nil {
					t.Fatal(err)
				}
			}
			for _, op := range ops {
				for nth := 1; nth <= 16; nth++ { // every such call of this Close
					g.InjectFault(op, nth, errRefused)
				}
			}
			err = m.Close()
			g.ClearFaults()
			if c.recovered {
				if err != nil {
					t.Fatalf("Close with %v refused: %v, want nil: it made up for it", ops, err)
				}
				checkLeaks(t, g)
				return
			}
			if !errors.Is(err, errRefused) {
				t.Fatalf("Close with %v refused: %v, want the refusal", ops, err)
			}
			if len(g.Leaks()) <= base {
				t.Fatalf("nothing kept after %v was refused", ops)
			}
			if err := m.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := m.Close(); err != nil {
				t.Fatalf("third Close: %v", err)
			}
			checkLeaks(t, g)
		})
	}
}
