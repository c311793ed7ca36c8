package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"

	"github.com/gpumem/gpumem/trace"
	"github.com/gpumem/gpumem/trace/torchsnapshot"
)

// bundledTrace is the bundled trace, testdata/pytorch-gpt.trace.gz (its
// documented place), embedded from a copy beside this package so that the
// binary replays it from any directory; a test checks the copy is the same.
//
//go:embed bundled/pytorch-gpt.trace.gz
var bundledTrace []byte

// bundledTraceName is the bundled trace's documented path.
const bundledTraceName = "testdata/pytorch-gpt.trace.gz"

// stdin is what "-" reads; tests replace it.
var stdin io.Reader = os.Stdin

// readBundled decodes the embedded trace.
func readBundled() (*trace.Trace, error) {
	tr, err := trace.Read(bytes.NewReader(bundledTrace))
	if err != nil {
		return nil, fmt.Errorf("gpumem: the bundled trace: %w", err)
	}
	tr.Name = trace.NameOf(bundledTraceName)
	return tr, nil
}

// openStdin returns standard input for "-", buffered, with its first bytes
// (at most 4096, for telling a snapshot from a trace): the readers take it
// from there as they take a file, streamed, within their own limits, not
// read whole into memory first.
func openStdin() (*bufio.Reader, []byte, error) {
	r, head, err := peekHead(stdin, "reading standard input")
	if err != nil {
		return nil, nil, err
	}
	if len(head) == 0 {
		return nil, nil, fmt.Errorf("gpumem: standard input is empty (\"-\" reads a trace or a snapshot from it)")
	}
	return r, head, nil
}

// peekHead buffers src and looks at its first 4096 bytes (fewer if it is
// shorter) without consuming them; what names src in the error.
func peekHead(src io.Reader, what string) (*bufio.Reader, []byte, error) {
	r := bufio.NewReaderSize(src, 64<<10)
	head, err := r.Peek(4096)
	if err != nil && err != io.EOF {
		return nil, nil, fmt.Errorf("gpumem: %s: %w", what, err)
	}
	return r, head, nil
}

// isSnapshotData tells a PyTorch snapshot from a trace by its first bytes.
func isSnapshotData(data []byte) bool {
	return torchsnapshot.IsSnapshot(data[:min(len(data), 4096)])
}
