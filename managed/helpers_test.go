package managed

import (
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

// adviceCall is one Advise call seen by the recorder.
type adviceCall struct {
	p      gpumem.Ptr
	size   uint64
	advice gpumem.Advice
	loc    gpumem.Location
}

// recorder is the simulator with its advice recorded, a name of choice and,
// optionally, devices that cannot migrate managed pages.
type recorder struct {
	*sim.GPU
	name      string
	noMigrate bool

	mu     sync.Mutex
	advice []adviceCall
	ops    []string // advice and prefetches in call order: "set_preferred_location host", "prefetch device 0"
}

func (r *recorder) Name() string {
	if r.name != "" {
		return r.name
	}
	return r.GPU.Name()
}

func (r *recorder) Advise(p gpumem.Ptr, size uint64, advice gpumem.Advice, loc gpumem.Location) error {
	var err error
	if r.name == "hip" && (advice == gpumem.AdviseSetCoarseGrain || advice == gpumem.AdviseUnsetCoarseGrain) {
		err = nil // the simulator speaks CUDA; accept HIP's advice here
	} else {
		err = r.GPU.Advise(p, size, advice, loc)
	}
	if err == nil {
		r.mu.Lock()
		r.advice = append(r.advice, adviceCall{p, size, advice, loc})
		r.ops = append(r.ops, advice.String()+" "+loc.String())
		r.mu.Unlock()
	}
	return err
}

func (r *recorder) Prefetch(p gpumem.Ptr, size uint64, loc gpumem.Location, s gpumem.Stream) error {
	err := r.GPU.Prefetch(p, size, loc, s)
	if err == nil {
		r.mu.Lock()
		r.ops = append(r.ops, "prefetch "+loc.String())
		r.mu.Unlock()
	}
	return err
}

// takeOps returns the advice and prefetches recorded since the last call.
func (r *recorder) takeOps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ops
	r.ops = nil
	return out
}

// accessedBy replays the recorded accessed-by advice on [p, p+size) and
// returns the devices left advised.
func (r *recorder) accessedBy(p gpumem.Ptr, size uint64) map[gpumem.Location]bool {
	set := map[gpumem.Location]bool{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.advice {
		if c.p < p.Add(size) && p < c.p.Add(c.size) {
			switch c.advice {
			case gpumem.AdviseSetAccessedBy:
				set[c.loc] = true
			case gpumem.AdviseUnsetAccessedBy:
				delete(set, c.loc)
			}
		}
	}
	return set
}

func (r *recorder) DeviceAttribute(dev int, a gpumem.Attribute) (int, error) {
	if r.noMigrate && a == gpumem.AttrConcurrentManagedAccess {
		return 0, nil
	}
	return r.GPU.DeviceAttribute(dev, a)
}

// calls returns the recorded advice on ranges overlapping [p, p+size).
func (r *recorder) calls(p gpumem.Ptr, size uint64, advice gpumem.Advice) []adviceCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []adviceCall
	for _, c := range r.advice {
		if c.advice == advice && c.p < p.Add(size) && p < c.p.Add(c.size) {
			out = append(out, c)
		}
	}
	return out
}

// newRecorder makes a simulated machine wrapped in a recorder.
func newRecorder(t testing.TB, cfg sim.Config) *recorder {
	t.Helper()
	cfg.NoStacks = false
	g := simtest.New(t, cfg)
	t.Cleanup(func() { _ = g.Close() })
	return &recorder{GPU: g}
}

// newAlloc makes an allocator over b (forced on) and checks at cleanup that
// Close leaves nothing behind in the simulator.
func newAlloc(t testing.TB, r *recorder, b gpumem.Backend, opts Options) *Allocator {
	t.Helper()
	opts.Force = true
	a, err := New(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// setup is the common case: one recorded simulated device.
func setup(t testing.TB, cfg sim.Config, opts Options) (*recorder, *Allocator) {
	r := newRecorder(t, cfg)
	return r, newAlloc(t, r, r, opts)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

type cachingOptions = caching.Options
