package tests

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/sim"
)

// advising is a simulated backend that answers the optional capabilities as
// a HIP backend does: managed pages do not migrate (XNACK off) although
// concurrent managed access says 1, and VMM-backed defaults are off.
type advising struct{ gpumem.Backend }

func (advising) ManagedPagesMigrate(int) (bool, error) { return false, nil }
func (advising) VirtualMemoryDefault() (bool, string) {
	return false, "HIP 6.4.43484 is older than 7.0"
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// TestManagedMigrationCapability: the managed allocator follows the
// backend's ManagedPagesMigrate, not concurrent managed access.
func TestManagedMigrationCapability(t *testing.T) {
	b := advising{sim.NewDefault()}
	if v, err := b.DeviceAttribute(0, gpumem.AttrConcurrentManagedAccess); err != nil || v == 0 {
		t.Skipf("the simulator reports concurrent managed access %d, %v", v, err)
	}
	o := managed.DefaultOptions()
	o.Force = true
	a, err := managed.New(b, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.CanMigrate(0) {
		t.Error("CanMigrate(0) is true where the backend says managed pages do not migrate")
	}
}

// TestVirtualMemoryDefaultCapability: growable segments, on by default, stay
// off where the backend advises against VMM by default, and say why.
func TestVirtualMemoryDefaultCapability(t *testing.T) {
	var l logs
	o := caching.DefaultOptions()
	o.Logf = l.logf
	a, err := caching.New(advising{sim.NewDefault()}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !l.has("growable segments are off on device 0: HIP 6.4.43484 is older than 7.0") {
		t.Errorf("no message turning growable segments off: %q", l.lines)
	}
}
