package gzsniff

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"
)

func TestOpen(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte("hello"))
	zw.Close()
	for name, in := range map[string][]byte{"plain": []byte("hello"), "gzip": z.Bytes()} {
		r, done, err := Open(bytes.NewReader(in), 16)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := io.ReadAll(r)
		done()
		if err != nil || string(got) != "hello" {
			t.Errorf("%s: read %q, %v", name, got, err)
		}
	}
	// Truncated gzip: the header reads, the body is corrupt.
	r, done, err := Open(bytes.NewReader(z.Bytes()[:len(z.Bytes())-6]), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, err := io.ReadAll(r); !Corrupt(err) {
		t.Errorf("truncated gzip: %v, not reported as corrupt", err)
	}
	if _, _, err := Open(bytes.NewReader([]byte{0x1f, 0x8b, 0}), 16); err == nil {
		t.Error("a broken gzip header opened")
	}
	if Corrupt(errors.New("disk on fire")) {
		t.Error("a reader's own error counted as corrupt data")
	}
}
