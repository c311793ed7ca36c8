package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpumem/gpumem/trace"
	"github.com/gpumem/gpumem/trace/torchsnapshot"
)

const convertUsage = `usage: gpumem convert [--device N] [-o OUT] SNAPSHOT|-
  converts a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, plain or
  gzip; - reads it from stdin) into a gpumem trace: OUT, gzip-compressed when it ends in .gz (default: stdout)
`

func cmdConvert(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("convert", convertUsage, stdout, stderr)
	device := fs.Int("device", -1, "the snapshot's device to convert (default: 0, or the only device with a history)")
	out := fs.String("o", "", "write the trace to `OUT` (.gz: gzip-compressed; default or -: stdout)")
	files, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if len(files) != 1 {
		return fail(stderr, convertUsage, usagef("convert takes one snapshot file (got %d)", len(files)))
	}
	if *device < -1 {
		return fail(stderr, convertUsage, usagef("--device must be 0 or more (got %d)", *device))
	}
	tr, err := convertSnapshot(files[0], *device, stderr)
	if err != nil {
		return fail(stderr, convertUsage, err)
	}
	if err := writeTraceFile(*out, tr, stdout); err != nil {
		return fail(stderr, convertUsage, err)
	}
	if *out != "" && *out != "-" {
		fmt.Fprintf(stderr, "gpumem: wrote %s\n", *out)
	}
	return exitOK
}

// convertSnapshot reads a snapshot file and converts one device's history,
// printing the conversion's report on stderr. dev -1 picks device 0, or the
// only device whose history holds anything when device 0's is empty.
// A path of "-" reads the snapshot from standard input (named "stdin").
func convertSnapshot(path string, dev int, stderr io.Writer) (*trace.Trace, error) {
	var (
		s    *torchsnapshot.Snapshot
		err  error
		name string
	)
	if path == "-" {
		r, _, rerr := openStdin()
		if rerr != nil {
			return nil, rerr
		}
		s, err = torchsnapshot.Read(r)
		path, name = "stdin", "stdin"
		if err != nil {
			err = fmt.Errorf("stdin: %w", err)
		}
	} else {
		s, err = torchsnapshot.ReadFile(path)
		name = torchsnapshot.NameOf(path)
	}
	if err != nil {
		return nil, err
	}
	return snapshotTrace(s, path, name, dev, stderr)
}

// snapshotTrace converts one device of a decoded snapshot (dev -1: pick).
func snapshotTrace(s *torchsnapshot.Snapshot, path, name string, dev int, stderr io.Writer) (*trace.Trace, error) {
	if dev < 0 {
		dev = pickDevice(s)
	}
	tr, rep, err := s.Trace(dev, torchsnapshot.Options{Name: name})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(stderr, "gpumem: %s: PyTorch snapshot, %s\n", path, rep)
	return tr, nil
}

// pickDevice is device 0 unless its history is empty and exactly one other
// device's is not.
func pickDevice(s *torchsnapshot.Snapshot) int {
	if len(s.Devices) == 0 || len(s.Devices[0]) > 0 {
		return 0
	}
	found := -1
	for d, h := range s.Devices {
		if len(h) > 0 {
			if found >= 0 {
				return 0
			}
			found = d
		}
	}
	return max(found, 0)
}

// writeTraceFile writes tr to the file out (gzip when it ends in .gz), or to
// stdout when out is "" or "-".
func writeTraceFile(out string, tr *trace.Trace, stdout io.Writer) (err error) {
	w := stdout
	if out != "" && out != "-" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var dst io.Writer = bw
	var zw *gzip.Writer
	if strings.HasSuffix(out, ".gz") {
		zw = gzip.NewWriter(bw)
		dst = zw
	}
	if err := trace.Write(dst, tr); err != nil {
		return err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("gpumem: %s: %w", out, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gpumem: %s: %w", out, err)
	}
	return nil
}

// hasPickleSuffix reports whether path names a snapshot by its suffix
// (.pickle, .pickle.gz).
func hasPickleSuffix(path string) bool {
	return strings.HasSuffix(strings.TrimSuffix(path, ".gz"), ".pickle")
}

// isSnapshotFile tells a PyTorch snapshot from a trace: by a .pickle
// suffix, or by its first bytes (a pickle, plain or gzip-compressed).
func isSnapshotFile(path string) bool {
	if hasPickleSuffix(path) {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4096)
	k, _ := io.ReadFull(f, head)
	return torchsnapshot.IsSnapshot(head[:k])
}

// readTraceOrSnapshot reads a trace file, or converts a PyTorch snapshot
// file (its device 0, or its only device with a history). A path of "-"
// reads either from standard input; a path that is neither a regular file
// nor a directory (a pipe: bash's <(zcat x.gz), /dev/stdin) is opened once
// and read as standard input is, since looking at its first bytes consumes
// them.
func readTraceOrSnapshot(path string, stderr io.Writer) (*trace.Trace, error) {
	if path == "-" {
		r, head, err := openStdin()
		if err != nil {
			return nil, err
		}
		return readStream(r, head, "stdin", false, stderr)
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("gpumem: %w", err)
		}
		defer f.Close()
		r, head, err := peekHead(f, path)
		if err != nil {
			return nil, err
		}
		return readStream(r, head, path, hasPickleSuffix(path), stderr)
	}
	if isSnapshotFile(path) {
		return convertSnapshot(path, -1, stderr)
	}
	return trace.ReadFile(path)
}

// readStream reads a trace, or converts a snapshot (as snapshot says, or as
// its first bytes, head, show), from r, which is read once; path names it in
// messages and gives the trace's name.
func readStream(r io.Reader, head []byte, path string, snapshot bool, stderr io.Writer) (*trace.Trace, error) {
	if snapshot || isSnapshotData(head) {
		s, err := torchsnapshot.Read(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return snapshotTrace(s, path, torchsnapshot.NameOf(path), -1, stderr)
	}
	tr, err := trace.Read(r)
	if pe := (*trace.ParseError)(nil); errors.As(err, &pe) {
		pe.Name = path // "gpumem: PATH: line N: ..."
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr.Name = trace.NameOf(path)
	return tr, nil
}
