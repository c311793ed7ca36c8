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

func TestRetryIsBounded(t *testing.T) {
	var k Hooks
	if k.Retry(0, 1, 0) {
		t.Fatal("retry with no handler")
	}
	var attempts []int
	k.SetHandler(func(dev int, size uint64, attempt int) bool { attempts = append(attempts, attempt); return true })
	n := 0
	for attempt := 0; k.Retry(0, 1, attempt); attempt++ {
		n++
		if n > 100 {
			t.Fatal("unbounded retries")
		}
	}
	if n != MaxAttempts {
		t.Fatalf("%d retries; want %d", n, MaxAttempts)
	}
	if err := CheckAttempts(attempts); err != nil {
		t.Fatal(err)
	}
	k.SetHandler(func(dev int, size uint64, attempt int) bool { return false })
	if k.Retry(0, 1, 0) {
		t.Fatal("retry after the handler declined")
	}
}

func TestCheckAttempts(t *testing.T) {
	if MaxAttempts != 8 {
		t.Errorf("MaxAttempts is %d; the Allocator contract in resource.go says eight", MaxAttempts)
	}
	good := make([]int, MaxAttempts)
	for i := range good {
		good[i] = i
	}
	if err := CheckAttempts(good); err != nil {
		t.Errorf("0 to %d: %v", MaxAttempts-1, err)
	}
	swapped := append([]int(nil), good...)
	swapped[1], swapped[2] = 2, 1
	for _, bad := range [][]int{nil, good[:MaxAttempts-1], append(good, MaxAttempts), swapped} {
		if err := CheckAttempts(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
