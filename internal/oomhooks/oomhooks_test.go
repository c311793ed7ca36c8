package oomhooks

import (
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
)

func TestHooks(t *testing.T) {
	var k Hooks
	described := 0
	describe := func() *gpumem.OutOfMemoryError { described++; return &gpumem.OutOfMemoryError{Requested: 7} }
	k.Notify(describe)
	if described != 0 {
		t.Fatal("the failure was described with no observer")
	}
	if k.Handler() != nil {
		t.Fatal("a zero Hooks has a handler")
	}
	k.SetHandler(func(int, uint64, int) bool { return true })
	if h := k.Handler(); h == nil || !h(0, 1, 0) {
		t.Fatal("the handler set is not the one returned")
	}
	k.SetHandler(nil)
	if k.Handler() != nil {
		t.Fatal("SetHandler(nil) left a handler")
	}
	k.AddObserver(nil)
	var got []uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.AddObserver(func(e *gpumem.OutOfMemoryError) { mu.Lock(); got = append(got, e.Requested); mu.Unlock() })
		}()
	}
	wg.Wait()
	k.Notify(describe)
	if len(got) != 4 || described != 1 {
		t.Fatalf("observers told %v, described %d times", got, described)
	}
}
