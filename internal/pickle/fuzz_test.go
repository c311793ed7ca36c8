package pickle

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzPickle: no input may panic or hang the decoder, and every error
// matches ErrMalformed. What decodes, Encode writes (or refuses with
// ErrUnsupported: a cycle, a string not UTF-8), and that pickle decodes to a
// value Encode writes to the same bytes.
func FuzzPickle(f *testing.F) {
	for _, name := range []string{"data-p4.pickle", "nobytes-p0.pickle", "nobytes-p2.pickle"} {
		if raw, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(raw)
		}
	}
	f.Add([]byte{0x80, 4, ']', 0x94, 'h', 0, 'a', '.'}) // a list containing itself
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Decode(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not matching ErrMalformed: %v", err)
			}
			return
		}
		var enc bytes.Buffer
		if err := encode(&enc, v, 1<<16); err != nil {
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("encode error not matching ErrUnsupported: %v", err)
			}
			return
		}
		v2, err := Decode(bytes.NewReader(enc.Bytes()))
		if err != nil {
			t.Fatalf("decoding what Encode wrote: %v", err)
		}
		var enc2 bytes.Buffer
		if err := encode(&enc2, v2, 1<<16); err != nil || !bytes.Equal(enc.Bytes(), enc2.Bytes()) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}
