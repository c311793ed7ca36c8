package torchsnapshot

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

// FuzzSnapshot feeds arbitrary bytes to Read and converts whatever decodes:
// nothing may panic, every error must match gpumem.ErrInvalidValue, and a
// converted trace must be valid.
func FuzzSnapshot(f *testing.F) {
	f.Add(pk("}(", str("device_traces"), "](](}(", str("action"), str("alloc"), str("addr"), "K\x40", str("size"), "M\x00\x02", str("stream"), "K\x00", "ue", "e", "u"))
	f.Add(pk("}(", str("device_traces"), "](](}(", str("action"), str("free_requested"), str("addr"), "K\x40", str("size"), "M\x00\x02", str("stream"), "K\x07", "ue", "e", "u"))
	f.Add(pk("}"))
	f.Add([]byte{0x80, 4, 'h', 0, '.'})
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Read(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, gpumem.ErrInvalidValue) {
				t.Fatalf("error not matching ErrInvalidValue: %v", err)
			}
			return
		}
		for d := range s.Devices {
			tr, _, err := s.Trace(d, Options{Name: "fuzz"})
			if err != nil {
				if !errors.Is(err, gpumem.ErrInvalidValue) {
					t.Fatalf("error not matching ErrInvalidValue: %v", err)
				}
				continue
			}
			if err := tr.Validate(); err != nil {
				t.Fatalf("invalid trace: %v", err)
			}
		}
	})
}
