package backendtest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

// must fails the test on err.
func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// skipIfNotSupported skips the test, saying why, when err says the backend
// lacks the operation; it fails the test on any other error.
func skipIfNotSupported(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, gpumem.ErrNotSupported) {
		t.Skipf("%s is not supported by this backend: %v", what, err)
	}
	t.Fatalf("%s: %v", what, err)
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

func readBack(t *testing.T, b gpumem.Backend, p gpumem.Ptr, n int) []byte {
	t.Helper()
	out := make([]byte, n)
	must(t, b.CopyFromDevice(out, p), "CopyFromDevice")
	return out
}

func expectBytes(t *testing.T, got, want []byte, what string) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: bytes differ at offset %d (of %d)", what, i, len(want))
	}
}

func malloc(t *testing.T, b gpumem.Backend, dev int, size uint64) gpumem.Ptr {
	t.Helper()
	p, err := b.Malloc(dev, size)
	must(t, err, "Malloc")
	if p == 0 {
		t.Fatalf("Malloc(%d) returned a null pointer", size)
	}
	t.Cleanup(func() {
		if err := b.Free(dev, p); err != nil && !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("Free: %v", err)
		}
	})
	return p
}

func newStream(t *testing.T, b gpumem.Backend, dev int, flags gpumem.StreamFlags) gpumem.Stream {
	t.Helper()
	s, err := b.StreamCreate(dev, flags, 0)
	must(t, err, "StreamCreate")
	t.Cleanup(func() {
		_ = b.StreamSynchronize(s)
		if err := b.StreamDestroy(s); err != nil && !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("StreamDestroy: %v", err)
		}
	})
	return s
}

func newEvent(t *testing.T, b gpumem.Backend, dev int, flags gpumem.EventFlags) gpumem.Event {
	t.Helper()
	e, err := b.EventCreate(dev, flags)
	must(t, err, "EventCreate")
	t.Cleanup(func() {
		if err := b.EventDestroy(e); err != nil && !errors.Is(err, gpumem.ErrClosed) {
			t.Errorf("EventDestroy: %v", err)
		}
	})
	return e
}
