package managed

import (
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/sim"
)

func TestManyGoroutines(t *testing.T) {
	r, a := setup(t, sim.Config{Devices: []sim.DeviceConfig{{}, {}}}, Options{SegmentSize: 32 * mib})
	const workers, rounds = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			dev := w % 2
			s, err := r.StreamCreate(dev, gpumem.StreamNonBlocking, 0)
			if err != nil {
				errs <- err
				return
			}
			defer r.StreamDestroy(s)
			for i := 0; i < rounds; i++ {
				size := uint64(1+(i*w)%7) * 300 * 1024
				loc := gpumem.DeviceLocation(dev)
				if i%3 == 0 {
					loc = host
				}
				b, err := a.Alloc(size, loc, s)
				if err != nil {
					errs <- err
					return
				}
				if _, err := b.To(gpumem.DeviceLocation(1-dev), ToOptions{Stream: s}); err != nil {
					errs <- err
					return
				}
				if _, err := b.To(host, ToOptions{Stream: s, NonBlocking: i%2 == 0}); err != nil {
					errs <- err
					return
				}
				_ = a.Residency()
				_ = a.Stats(dev)
				if i%4 == 0 {
					if err := a.Deallocate(b.Ptr, s); err != nil {
						errs <- err
						return
					}
				} else if err := b.Free(); err != nil {
					errs <- err
					return
				}
			}
			if err := r.StreamSynchronize(s); err != nil {
				errs <- err
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(a.Residency()) != 0 {
		t.Fatalf("residency after every free: %v", a.Residency())
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if a.Reserved() != 0 {
		t.Fatalf("reserved %d after EmptyCache", a.Reserved())
	}
}
