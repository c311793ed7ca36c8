package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/replay"
	"github.com/gpumem/gpumem/trace"
)

const replayUsage = `usage: gpumem replay [--backend cuda|hip|sim|auto] [--allocator NAME] [--conf CONF]
                     [--sim-capacity BYTES] [--sim-devices N] [--html FILE] [--json] [--profile]
                     [--snapshot FILE]
                     [TRACE...]
`

// bundledTracePath is the bundled trace, relative to the repository root.
var bundledTracePath = filepath.Join("testdata", "pytorch-gpt.trace.gz")

func cmdReplay(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", replayUsage, stderr)
	backend := fs.String("backend", "", "backend: cuda, hip, sim or auto: a GPU if one opens, else the simulator (default: GPUMEM_BACKEND, else auto)")
	allocator := fs.String("allocator", "", "allocator to replay through (default: the conf's backend key, else every one linked in)")
	confFlag := fs.String("conf", "", "allocator configuration in GPUMEM_ALLOC_CONF syntax (default: $GPUMEM_ALLOC_CONF)")
	simCap := bytesFlag{n: defaultSimCapacity}
	fs.Var(&simCap, "sim-capacity", "memory of each simulated device: bytes or with a unit, e.g. 80GiB (default 140GiB)")
	simDevices := fs.Int("sim-devices", 1, "number of simulated devices")
	htmlOut := fs.String("html", "", "write a self-contained page with the memory timeline to `FILE`")
	asJSON := fs.Bool("json", false, "print one JSON object per trace and allocator, one a line")
	profile := fs.Bool("profile", false, "time every backend call the allocator makes in the replay loop: print calls, total and longest time per operation to stderr (and \"profile\" in --json)")
	snapshotOut := fs.String("snapshot", "", "write the replay's memory snapshot and history, in PyTorch's pickle layout for pytorch.org/memory_viz, to `FILE`")
	files, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if err := checkSnapshotPath(*snapshotOut); err != nil {
		return fail(stderr, replayUsage, err)
	}
	if err := checkBackendName(*backend); err != nil {
		return fail(stderr, replayUsage, err)
	}
	if *simDevices < 1 || *simDevices > 64 {
		return fail(stderr, replayUsage, usagef("--sim-devices must be 1..64 (got %d)", *simDevices))
	}
	if simCap.n == 0 {
		return fail(stderr, replayUsage, usagef("--sim-capacity must be above 0"))
	}

	// The configuration: --conf, else the environment.
	var (
		conf config.Conf
		err  error
	)
	fromFlag := false
	if isSet(fs, "conf") {
		fromFlag = true
		conf, err = config.Parse(*confFlag)
	} else {
		conf, err = config.FromEnv()
	}
	if err != nil {
		src := "GPUMEM_ALLOC_CONF"
		if fromFlag {
			src = "--conf"
		}
		return fail(stderr, replayUsage, usagef("%s: %v", src, trimPrefix(err)))
	}

	// Which allocators: --allocator, else the conf's backend key, else every
	// one linked in (skipping those that are off unless named, and those the
	// conf does not apply to).
	registered := gpumem.Allocators()
	available := make([]string, len(registered))
	for i, info := range registered {
		available[i] = info.Name
	}
	names := available
	every := *allocator == "" && conf.Backend == ""
	switch {
	case *allocator != "":
		names = []string{*allocator}
	case conf.Backend != "":
		names = []string{conf.Backend}
	}
	if len(names) == 0 {
		return fail(stderr, replayUsage, fmt.Errorf("gpumem: no allocator is linked into this build"))
	}
	for _, n := range names {
		if !slices.Contains(available, n) {
			return fail(stderr, replayUsage, usagef("unknown allocator %q (available: %v)", n, available))
		}
	}
	if every {
		var on []string
		for _, info := range registered {
			if info.Enabled != nil {
				if ok, why := info.Enabled(); !ok {
					fmt.Fprintf(stderr, "gpumem: skipping %s: %s\n", info.Name, why)
					continue
				}
			}
			on = append(on, info.Name)
		}
		names = on
	}

	// The traces, read before any device is touched.
	traces, err := loadTraces(files, stderr)
	if err != nil {
		return fail(stderr, replayUsage, err)
	}

	b, err := openReplayBackend(*backend, *simDevices, simCap.n, stderr)
	if err != nil {
		return fail(stderr, replayUsage, err)
	}
	defer b.Close()
	// With --profile the allocators run over a timing wrapper of the backend.
	rb := b
	var prof *replay.Profiler
	if *profile {
		if prof, err = replay.NewProfiler(b); err != nil {
			return fail(stderr, replayUsage, err)
		}
		rb = prof
	}

	var results []replay.Result
	failed := false
	for _, tr := range traces {
		for _, name := range names {
			a, err := gpumem.NewNamedAllocator(rb, name, conf.String())
			if err != nil {
				if every && len(names) > 1 && (errors.Is(err, gpumem.ErrInvalidValue) || errors.Is(err, gpumem.ErrNotSupported)) {
					fmt.Fprintf(stderr, "gpumem: skipping %s: %v\n", name, trimPrefix(err))
					continue
				}
				fmt.Fprintf(stderr, "gpumem: %s: %v\n", tr.Name, trimPrefix(err))
				failed = true
				continue
			}
			var rec *snapshotRecorder
			if *snapshotOut != "" {
				rec = newSnapshotRecorder(a)
				a = rec
			}
			opts := replay.Options{Allocator: name, Conf: conf.String()}
			if *htmlOut == "" {
				// Only the page draws the timeline; sampling it inside
				// the timed loop (a statistics copy and two clock reads
				// every few events) would be counted in ns_per_pair.
				opts.TimelinePoints = -1
			}
			res, err := replay.Run(rb, tr, a, opts)
			if err != nil {
				settle(b)
				fmt.Fprintf(stderr, "gpumem: %s through %s: %v\n", tr.Name, name, trimPrefix(err))
				failed = true
				continue
			}
			settle(b)
			results = append(results, res)
			if rec != nil {
				path := snapshotFileFor(*snapshotOut, len(traces)*len(names) > 1, tr.Name, name)
				if err := rec.write(path); err != nil {
					fmt.Fprintf(stderr, "gpumem: --snapshot: %v\n", trimPrefix(err))
					failed = true
				} else {
					fmt.Fprintf(stderr, "gpumem: wrote %s\n", path)
				}
			}
			if prof != nil {
				conf := res.Conf
				if conf == "" {
					conf = "(defaults)"
				}
				loop := time.Duration(res.NsPerPair * float64(res.Pairs))
				fmt.Fprintf(stderr, "gpumem: profile of %s through %s, conf %s: loop %v, %d pairs, %.0f ns/pair\n",
					res.Trace, res.Allocator, conf, loop.Round(time.Microsecond), res.Pairs, res.NsPerPair)
				replay.WriteProfile(stderr, res.Profile, loop)
			}
			if *asJSON {
				line, _ := json.Marshal(res)
				fmt.Fprintf(stdout, "%s\n", line)
			}
		}
	}
	if !*asJSON {
		printResults(stdout, results)
	}
	if *htmlOut != "" && len(results) > 0 {
		if err := writeHTML(*htmlOut, results); err != nil {
			fmt.Fprintf(stderr, "gpumem: --html: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stderr, "gpumem: wrote %s\n", *htmlOut)
	}
	if failed || len(results) == 0 {
		if len(results) == 0 && !failed {
			fmt.Fprintln(stderr, "gpumem: no allocator accepted the configuration")
		}
		return exitFail
	}
	return exitOK
}

// settle makes one replay's leftovers invisible to the next on the same
// backend: memory an allocator left cached in device 0's default
// stream-ordered pool (whose high-water mark is process-wide) is released and
// the pool's high-water marks are reset. Errors are ignored: a backend
// without pools has nothing to settle.
func settle(b gpumem.Backend) {
	b.DeviceSynchronize(0)
	pool, err := b.DefaultMemPool(0)
	if err != nil {
		return
	}
	b.MemPoolTrimTo(pool, 0)
	b.MemPoolSetAttribute(pool, gpumem.PoolReservedMemHigh, 0)
	b.MemPoolSetAttribute(pool, gpumem.PoolUsedMemHigh, 0)
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// loadTraces reads the named traces (or PyTorch snapshots), or the bundled
// trace when none is named.
func loadTraces(files []string, stderr io.Writer) ([]*trace.Trace, error) {
	if len(files) == 0 {
		tr, err := trace.ReadFile(bundledTracePath)
		if err != nil {
			return nil, fmt.Errorf("gpumem: no trace given, and the bundled trace cannot be read (%w): run from the repository's root, or name a trace or a PyTorch snapshot", err)
		}
		fmt.Fprintf(stderr, "gpumem: no trace given: replaying the bundled trace %s (recorded from a real PyTorch training run; see testdata/README.md)\n", bundledTracePath)
		return []*trace.Trace{tr}, nil
	}
	var out []*trace.Trace
	for _, f := range files {
		tr, err := readTraceOrSnapshot(f, stderr)
		if err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	return out, nil
}

// openReplayBackend opens the backend; with auto, a real GPU if one opens,
// else the simulator, saying so on stderr.
func openReplayBackend(name string, simDevices int, simCap uint64, stderr io.Writer) (gpumem.Backend, error) {
	name = backendName(name)
	if name == "" || name == "auto" {
		b, err := gpumem.Open(gpumem.Options{Backend: "auto"})
		if err == nil {
			return b, nil
		}
		sb, serr := openSimulator(simDevices, simCap)
		if serr != nil {
			return nil, fmt.Errorf("%w; and the simulator: %w", err, serr)
		}
		fmt.Fprintf(stderr, "gpumem: no GPU opened (%v)\ngpumem: replaying on the SIMULATED device instead (backend sim, %d x %s); figures are not from a GPU\n",
			trimPrefix(err), simDevices, gpumem.FormatBytes(simCap))
		return sb, nil
	}
	b, err := openBackend(name, "", simDevices, simCap)
	if err != nil {
		return nil, err
	}
	if b.Name() == "sim" {
		fmt.Fprintf(stderr, "gpumem: replaying on the SIMULATED device (backend sim, %d x %s)\n", simDevices, gpumem.FormatBytes(simCap))
	}
	return b, nil
}

func printResults(w io.Writer, results []replay.Result) {
	if len(results) == 0 {
		return
	}
	header := []string{"trace", "allocator", "backend", "pairs", "floor", "peak reserved", "overhead", "device allocs", "OOMs", "ns/pair", "conf"}
	left := map[int]bool{0: true, 1: true, 2: true, 10: true} // text columns
	rows := [][]string{header}
	for _, r := range results {
		conf := r.Conf
		if conf == "" {
			conf = "(defaults)"
		}
		rows = append(rows, []string{r.Trace, r.Allocator, r.Backend, fmt.Sprint(r.Pairs),
			gib(r.PeakRequested), gib(r.PeakReserved), fmt.Sprintf("%.3f", r.Overhead),
			fmt.Sprint(r.DeviceAllocs), fmt.Sprint(r.OOMs), fmt.Sprintf("%.0f", r.NsPerPair), conf})
	}
	width := make([]int, len(header))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len(c))
			if left[i] {
				if i == len(row)-1 {
					pad = ""
				}
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w, "\nfloor: peak of live requested bytes; overhead: peak reserved / floor; ns/pair: host time per allocation+free")
}

func gib(n uint64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
