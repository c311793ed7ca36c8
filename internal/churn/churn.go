// Package churn stirs the Go runtime for tests of code that runs outside
// its usual rules (short calls into C, callbacks from C): a goroutine that
// collects garbage in a loop, stopping the world each time, and changes
// GOMAXPROCS as it goes, so that processors come and go under the code
// being tested.
package churn

import (
	"runtime"
	"sync"
)

// Start begins the churn and returns the function that ends it, which
// waits for the goroutine to finish and restores GOMAXPROCS. Calling it
// twice is harmless.
func Start() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	procs := runtime.GOMAXPROCS(0)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			runtime.GC()
			if i%4 == 0 {
				runtime.GOMAXPROCS(1 + i/4%4)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			runtime.GOMAXPROCS(procs)
		})
	}
}
