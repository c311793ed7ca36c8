package torchsnapshot

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRead decodes train.pickle.gz (8,968 history entries, 660 KB of
// pickle) from memory, without the decompression.
func BenchmarkRead(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "train.pickle.gz"))
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(bytes.NewReader(plain)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrace converts the decoded history of train.pickle.gz.
func BenchmarkTrace(b *testing.B) {
	s, err := ReadFile(filepath.Join("testdata", "train.pickle.gz"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Trace(0, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
