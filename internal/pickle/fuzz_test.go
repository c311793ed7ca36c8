package pickle

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzPickle: no input may panic or hang the decoder, and every error
// matches ErrMalformed.
func FuzzPickle(f *testing.F) {
	for _, name := range []string{"data-p4.pickle", "nobytes-p0.pickle", "nobytes-p2.pickle"} {
		if raw, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(raw)
		}
	}
	f.Add([]byte{0x80, 4, ']', 0x94, 'h', 0, 'a', '.'}) // a list containing itself
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := Decode(bytes.NewReader(in)); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error not matching ErrMalformed: %v", err)
		}
	})
}
