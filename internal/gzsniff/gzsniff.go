// Package gzsniff opens input that may be gzip-compressed, telling it by
// gzip's magic bytes rather than by a file name, and tells malformed
// compressed data from a failing reader.
package gzsniff

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
)

// IsGzip reports whether b starts with gzip's magic bytes.
func IsGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// Open returns a buffered reader of r's content, decompressed when r starts
// with gzip's magic bytes, and a function that releases the decompressor.
// An error means a gzip header that could not be read.
func Open(r io.Reader, size int) (*bufio.Reader, func(), error) {
	br := bufio.NewReaderSize(r, size)
	if magic, _ := br.Peek(2); !IsGzip(magic) {
		return br, func() {}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, err
	}
	return bufio.NewReaderSize(zr, size), func() { zr.Close() }, nil
}

// Corrupt reports whether a read error means malformed or truncated
// compressed data rather than a failing reader.
func Corrupt(err error) bool {
	var ce flate.CorruptInputError
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ce)
}
