// Command gendemo writes the synthetic demo trace to testdata/demo.trace.gz
// (run from the repository root: go run ./internal/demotrace/gendemo).
package main

import (
	"compress/gzip"
	"fmt"
	"os"

	"github.com/gpumem/gpumem/internal/demotrace"
	"github.com/gpumem/gpumem/trace"
)

func main() {
	out := "testdata/demo.trace.gz"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	if err := write(out); err != nil {
		fmt.Fprintln(os.Stderr, "gendemo:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		f.Close()
		return err
	}
	if err := trace.Write(zw, demotrace.Generate(demotrace.Default)); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
