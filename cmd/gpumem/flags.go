package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/gpumem/gpumem"
)

// flagHelp is what parseCommand needs to answer --help and report a bad
// flag: the command's usage line and the writers of its run.
type flagHelp struct {
	usage          string
	stdout, stderr io.Writer
}

// helps maps each command's flag set to its flagHelp (run may be called
// concurrently by tests).
var helps sync.Map // *flag.FlagSet -> flagHelp

// newFlagSet makes a flag set that reports errors instead of exiting and
// prints nothing itself: parseCommand writes --help to stdout (flags spelled
// --flag, as the docs write them) and a bad flag as one line on stderr.
func newFlagSet(name, usageLine string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	helps.Store(fs, flagHelp{usage: usageLine, stdout: stdout, stderr: stderr})
	return fs
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments ("replay a.trace --json"); "--" ends the flags and a
// lone "-" (standard input) is a positional argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// Parse stops at "--" (consumed) or at the first non-flag.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseCommand parses a command's arguments with parseInterspersed. When ok
// is false the command returns code at once: exitOK after -h or --help (the
// help went to stdout), exitUsage after a flag error (reported on stderr in
// one line).
func parseCommand(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	v, _ := helps.LoadAndDelete(fs)
	h, _ := v.(flagHelp)
	if h.stdout == nil {
		h.stdout, h.stderr = io.Discard, io.Discard
	}
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, errHelp):
		writeHelp(h.stdout, fs, h.usage)
		return nil, exitOK, false
	case err != nil:
		fmt.Fprintf(h.stderr, "gpumem %s: %s (see 'gpumem %s --help')\n", fs.Name(), dashFlags(err.Error()), fs.Name())
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// flagName spells a flag as the docs do: --name, or -x for a one-letter flag.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// dashFlagRE matches a flag as the flag package writes it in its errors.
var dashFlagRE = regexp.MustCompile(`(^|[\s:])-([A-Za-z][A-Za-z0-9-]+)`)

// dashFlags rewrites the flag package's "-name" as "--name" in a message.
func dashFlags(msg string) string {
	return dashFlagRE.ReplaceAllString(msg, "$1--$2")
}

// writeHelp prints the usage line and every flag, as --flag.
func writeHelp(w io.Writer, fs *flag.FlagSet, usageLine string) {
	fmt.Fprint(w, usageLine)
	fmt.Fprintln(w, "\nflags:")
	fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		line := "  " + flagName(f.Name)
		if arg != "" {
			line += " " + strings.ToUpper(arg)
		}
		fmt.Fprintln(w, line)
		if d := f.DefValue; d != "" && d != "0" && d != "false" && !strings.Contains(text, "default") {
			text += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintf(w, "        %s\n", text)
	})
}

// checkWritable reports, before any work starts, whether a file can be
// written at path: an existing file must be writable and not a directory; a
// new one's directory must exist and take a file (a probe file is created
// and removed there; an existing file is left untouched).
func checkWritable(path string) error {
	if path == "" {
		return fmt.Errorf("empty file name")
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("cannot write %s: %s is not a directory", path, dir)
	}
	f, err := os.CreateTemp(dir, ".gpumem-probe-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// simFlags are the simulator's settings, --sim-devices and --sim-capacity,
// each read from its flag, else from its environment variable
// (GPUMEM_SIM_DEVICES, GPUMEM_SIM_CAPACITY, in the flags' syntax), else the
// default.
type simFlags struct {
	fs       *flag.FlagSet
	devices  *int
	capacity bytesFlag
}

// addSimFlags defines --sim-devices and --sim-capacity on fs.
func addSimFlags(fs *flag.FlagSet, what string) *simFlags {
	s := &simFlags{fs: fs, capacity: bytesFlag{n: defaultSimCapacity}}
	s.devices = fs.Int("sim-devices", 1, "number of simulated devices"+what+", 1..64 (default: GPUMEM_SIM_DEVICES, else 1)")
	fs.Var(&s.capacity, "sim-capacity", "memory of each simulated device"+what+": bytes or with a unit, e.g. 80GiB or 512MiB (default: GPUMEM_SIM_CAPACITY, else 140GiB)")
	return s
}

// resolve returns the settings, or a usage error naming the flag or the
// variable at fault.
func (s *simFlags) resolve() (devices int, capacity uint64, err error) {
	devices, capacity = *s.devices, s.capacity.n
	devSrc, capSrc := "--sim-devices", "--sim-capacity"
	if !isSet(s.fs, "sim-devices") {
		if v, ok := os.LookupEnv("GPUMEM_SIM_DEVICES"); ok && strings.TrimSpace(v) != "" {
			devSrc = "GPUMEM_SIM_DEVICES"
			n, perr := strconv.Atoi(strings.TrimSpace(v))
			if perr != nil {
				return 0, 0, usagef("GPUMEM_SIM_DEVICES: %q is not a number of devices (1..64)", v)
			}
			devices = n
		}
	}
	if !isSet(s.fs, "sim-capacity") {
		if v, ok := os.LookupEnv("GPUMEM_SIM_CAPACITY"); ok && strings.TrimSpace(v) != "" {
			capSrc = "GPUMEM_SIM_CAPACITY"
			n, perr := parseBytes(v)
			if perr != nil {
				return 0, 0, usagef("GPUMEM_SIM_CAPACITY: %v", perr)
			}
			capacity = n
		}
	}
	if devices < 1 || devices > 64 {
		return 0, 0, usagef("%s must be 1..64 (got %d)", devSrc, devices)
	}
	if capacity == 0 {
		return 0, 0, usagef("%s must be above 0", capSrc)
	}
	if maxSimCapacity > 0 && capacity > maxSimCapacity {
		return 0, 0, usagef("%s is %s, over the simulator's limit of %s a device", capSrc, gpumem.FormatBytes(capacity), gpumem.FormatBytes(maxSimCapacity))
	}
	return devices, capacity, nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// printJSON writes v to w as indented JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// bytesFlag is a byte count given as plain bytes or with a unit:
// KiB/MiB/GiB/TiB (also K/M/G/T), or KB/MB/GB/TB (powers of 1000).
type bytesFlag struct{ n uint64 }

func (b *bytesFlag) String() string {
	if b == nil {
		return "0"
	}
	return strconv.FormatUint(b.n, 10)
}

func (b *bytesFlag) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	b.n = n
	return nil
}

var units = []struct {
	suffix string
	mult   uint64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// parseBytes parses "1073741824", "80GiB", "1.5 GiB", "500MB".
func parseBytes(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	if t == "" {
		return 0, fmt.Errorf("%q is not a byte count (e.g. 80GiB or 85899345920)", s)
	}
	if n, err := strconv.ParseUint(t, 10, 64); err == nil {
		if n > math.MaxUint64/mult {
			return 0, fmt.Errorf("%q is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a byte count (e.g. 80GiB or 85899345920)", s)
	}
	v := f * float64(mult)
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return uint64(v), nil
}

// errHelp is what parsing returns for -h / --help.
var errHelp = flag.ErrHelp
