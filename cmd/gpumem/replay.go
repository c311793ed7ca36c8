package main

import (
	"encoding/json"
	"errors"
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
                     [--sim-capacity BYTES] [--sim-devices N] [--html FILE] [--json] [--passes N]
                     [--profile] [--cpuprofile FILE] [--snapshot FILE] [--verbose] [TRACE|SNAPSHOT|-...]
`

func cmdReplay(args []string, stdout, stderr io.Writer) (code int) {
	fs := newFlagSet("replay", replayUsage, stdout, stderr)
	backend := fs.String("backend", "", "backend: cuda, hip, sim or auto: a GPU if one opens, else the simulator (default: GPUMEM_BACKEND, else auto)")
	allocator := fs.String("allocator", "", "allocator to replay through (default: the conf's backend key, else every one linked in)")
	confFlag := fs.String("conf", "", "allocator configuration in GPUMEM_ALLOC_CONF syntax (default: $GPUMEM_ALLOC_CONF)")
	simFlags := addSimFlags(fs, "")
	verbose := fs.Bool("verbose", false, "say in full why no GPU opened before falling back to the simulator")
	htmlOut := fs.String("html", "", "write a self-contained page with the memory timeline to `FILE`")
	asJSON := fs.Bool("json", false, "print one JSON object per trace and allocator, one a line")
	profile := fs.Bool("profile", false, "time every backend call the allocator makes in the replay loop: print calls, total and longest time per operation to stderr (and \"profile\" in --json)")
	passes := fs.Int("passes", 1, "replay each trace N times back to back over the same allocator, freeing what a pass leaves live before the next, and report each pass (an allocator that has settled makes no device calls after the first); 1.."+fmt.Sprint(replay.MaxPasses))
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the replays (from the backend's opening to the last replay's end) to `FILE`, for go tool pprof: where gpumem's own host time goes")
	snapshotOut := fs.String("snapshot", "", "write the replay's memory snapshot and history, in PyTorch's pickle layout for pytorch.org/memory_viz, to `FILE`")
	files, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if *passes < 1 || *passes > replay.MaxPasses {
		return fail(stderr, replayUsage, usagef("--passes %d: want 1 to %d", *passes, replay.MaxPasses))
	}
	if err := checkSnapshotPath(*snapshotOut); err != nil {
		return fail(stderr, replayUsage, err)
	}
	if err := checkBackend(*backend); err != nil {
		return fail(stderr, replayUsage, err)
	}
	simDevices, simCap, err := simFlags.resolve()
	if err != nil {
		return fail(stderr, replayUsage, err)
	}
	if isSet(fs, "html") {
		if err := checkWritable(*htmlOut); err != nil {
			return fail(stderr, replayUsage, usagef("--html: %v", err))
		}
	}
	if isSet(fs, "cpuprofile") {
		if err := checkWritable(*cpuProfile); err != nil {
			return fail(stderr, replayUsage, usagef("--cpuprofile: %v", err))
		}
	}
	if stdins := slices.Index(files, "-"); stdins >= 0 && slices.Contains(files[stdins+1:], "-") {
		return fail(stderr, replayUsage, usagef("standard input (-) can be named once"))
	}

	// The configuration: --conf, else the environment.
	// Its errors, here and from the allocators, name where it came from.
	var conf config.Conf
	confSrc := config.EnvVar
	if isSet(fs, "conf") {
		confSrc = "--conf"
		conf, err = config.Parse(*confFlag)
	} else {
		conf, err = config.FromEnv()
	}
	if err != nil {
		return fail(stderr, replayUsage, usagef("%s", trimPrefix(gpumem.ConfFrom(err, confSrc))))
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

	if isSet(fs, "cpuprofile") {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return fail(stderr, "", err)
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(stderr, "gpumem: --cpuprofile: %v\n", err)
				if code == exitOK {
					code = exitFail
				}
			}
		}()
	}
	b, err := openReplayBackend(*backend, simDevices, simCap, *verbose, stderr)
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
	snapWritten := map[string]bool{} // --snapshot files written by this run
	failed := false
	skipped := map[string]bool{} // said once, not once per trace
	for _, tr := range traces {
		for _, name := range names {
			if skipped[name] {
				continue
			}
			a, err := gpumem.NewNamedAllocator(rb, name, conf.String())
			if err != nil {
				err = gpumem.ConfFrom(err, confSrc)
				if every && len(names) > 1 && (errors.Is(err, gpumem.ErrInvalidValue) || errors.Is(err, gpumem.ErrNotSupported)) {
					fmt.Fprintf(stderr, "gpumem: skipping %s: %v\n", name, trimPrefix(err))
					skipped[name] = true
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
			opts := replay.Options{Allocator: name, Conf: conf.String(), Passes: *passes}
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
				// Two traces of one name (d1/x.trace, d2/x.trace) would
				// share a file: the later ones are numbered.
				for n := 2; snapWritten[path]; n++ {
					ext := filepath.Ext(path)
					path = fmt.Sprintf("%s.%d%s", strings.TrimSuffix(snapshotFileFor(*snapshotOut, true, tr.Name, name), ext), n, ext)
				}
				snapWritten[path] = true
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

// loadTraces reads the named traces (or PyTorch snapshots; "-" is standard
// input), or the bundled trace, embedded in the binary, when none is named.
func loadTraces(files []string, stderr io.Writer) ([]*trace.Trace, error) {
	if len(files) == 0 {
		tr, err := readBundled()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "gpumem: no trace given: replaying the bundled trace %s (recorded from a real PyTorch training run; see testdata/README.md)\n", bundledTraceName)
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
// else the simulator, saying so on stderr in one line (verbose: with every
// backend's full reason).
func openReplayBackend(name string, simDevices int, simCap uint64, verbose bool, stderr io.Writer) (gpumem.Backend, error) {
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
		if verbose {
			fmt.Fprintf(stderr, "gpumem: no GPU opened: %v\n", trimPrefix(err))
		}
		fmt.Fprintf(stderr, "gpumem: no GPU opened (%s); replaying on the SIMULATED device instead (%s); figures are not from a GPU\n",
			openSummary(err), simDescription(simDevices, simCap))
		return sb, nil
	}
	b, err := openBackend(name, "", simDevices, simCap)
	if err != nil {
		return nil, err
	}
	if b.Name() == "sim" {
		fmt.Fprintf(stderr, "gpumem: replaying on the SIMULATED device (%s)\n", simDescription(simDevices, simCap))
	}
	return b, nil
}

// simDescription is "backend sim, 1 device of 140.00 GiB" (or "2 devices").
func simDescription(devices int, capacity uint64) string {
	unit := "devices"
	if devices == 1 {
		unit = "device"
	}
	return fmt.Sprintf("backend sim, %d %s of %s", devices, unit, gpumem.FormatBytes(capacity))
}

// openSummary says briefly why auto opened no GPU: per backend tried, "no
// library", "no device" or the start of its error (--verbose prints all).
func openSummary(err error) string {
	var oe *gpumem.OpenError
	if !errors.As(err, &oe) {
		return shorten(trimPrefix(err), 80)
	}
	regs := gpumem.AutoOrder()
	var parts []string
	for i, e := range oe.Tried {
		why := shorten(trimPrefix(e), 60)
		switch {
		case errors.Is(e, gpumem.ErrLibraryNotFound):
			why = "no library"
		case errors.Is(e, gpumem.ErrNoDevice):
			why = "no device"
		}
		if i < len(regs) {
			why = regs[i].Name + ": " + why
		}
		parts = append(parts, why)
	}
	return strings.Join(parts, "; ")
}

// shorten cuts s to about n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
	for _, r := range results {
		if len(r.Passes) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s through %s, by pass:\n", r.Trace, r.Allocator)
		for i, p := range r.Passes {
			fmt.Fprintf(w, "  pass %d: %s peak reserved, %d device allocs, %d device frees, %d device syncs, %.0f ns/pair\n",
				i+1, gib(p.PeakReserved), p.DeviceAllocs, p.DeviceFrees, p.DeviceSyncs, p.NsPerPair)
		}
	}
}

func gib(n uint64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
