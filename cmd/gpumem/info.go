package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpumem/gpumem"
)

var infoUsage = "usage: gpumem info [--backend " + strings.Join(backendNames(false), "|") + "|auto] [--library PATH] [--sim-devices N] [--sim-capacity BYTES] [--json]\n"

// deviceInfo is one device in info's report.
type deviceInfo struct {
	Index             int    `json:"index"`
	Name              string `json:"name"`
	TotalBytes        uint64 `json:"total_bytes"`
	FreeBytes         uint64 `json:"free_bytes"`
	ComputeCapability string `json:"compute_capability,omitempty"`
	Multiprocessors   int    `json:"multiprocessors,omitempty"`
	Managed           bool   `json:"managed"`
	ConcurrentManaged bool   `json:"concurrent_managed_access"`
	Pools             bool   `json:"pools"`
	VMM               bool   `json:"vmm"`
	Error             string `json:"error,omitempty"`
	// Telemetry is NVML's, ROCm SMI's or the simulator's reading of the
	// device (info_telemetry.go); absent when there is none.
	Telemetry *deviceTelemetry `json:"telemetry,omitempty"`
}

// infoReport is what info --json prints.
type infoReport struct {
	Backend        string         `json:"backend"`
	Library        string         `json:"library"`
	DriverVersion  int            `json:"driver_version"`
	RuntimeVersion int            `json:"runtime_version"`
	Devices        []deviceInfo   `json:"devices"`
	PeerAccess     [][]bool       `json:"peer_access"`
	Compiler       *compilerInfo  `json:"compiler,omitempty"`    // the run-time compiler; absent for the simulator
	Telemetry      *telemetryInfo `json:"telemetry,omitempty"`   // where the devices' telemetry came from, or why there is none
	ShortCalls     *bool          `json:"short_calls,omitempty"` // whether the backend's short calls are on; absent where it has none (docs/architecture.md)
	Error          string         `json:"error"`
}

func cmdInfo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("info", infoUsage, stdout, stderr)
	backend := fs.String("backend", "", "backend: "+strings.Join(backendNames(false), ", ")+" or auto (default: GPUMEM_BACKEND, else auto)")
	library := fs.String("library", "", "vendor library file to load (default: "+strings.Join(libraryEnvs(), " / ")+", else the usual names)")
	simFlags := addSimFlags(fs, " (with --backend sim)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return fail(stderr, infoUsage, usagef("info takes no arguments (got %q)", pos))
	}
	if err := checkBackend(*backend); err != nil {
		return fail(stderr, infoUsage, err)
	}
	simDevices, simCap, err := simFlags.resolve()
	if err != nil {
		return fail(stderr, infoUsage, err)
	}
	rep, err := gatherInfo(*backend, *library, simDevices, simCap)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return fail(stderr, infoUsage, err)
		}
		rep.Error = err.Error()
	}
	rep.Compiler = findCompiler(rep.Backend)
	if *asJSON {
		printJSON(stdout, rep)
	} else {
		printInfo(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gpumem: %v\n", trimPrefix(err))
		return exitFor(err)
	}
	return exitOK
}

func trimPrefix(err error) string {
	s := err.Error()
	if len(s) > 8 && s[:8] == "gpumem: " {
		return s[8:]
	}
	return s
}

func gatherInfo(backend, library string, simDevices int, simCap uint64) (infoReport, error) {
	// The backend asked for: the flag, else GPUMEM_BACKEND, else auto.
	rep := infoReport{Backend: backendName(backend), Library: library, Devices: []deviceInfo{}, PeerAccess: [][]bool{}}
	if rep.Backend == "" {
		rep.Backend = "auto"
	}
	b, err := openBackend(backend, library, simDevices, simCap)
	if err != nil {
		return rep, err
	}
	defer b.Close()
	rep.Backend, rep.Library = b.Name(), b.Library()
	if v, err := b.Version(); err == nil {
		rep.DriverVersion, rep.RuntimeVersion = v.Driver, v.Runtime
	}
	n, err := b.DeviceCount()
	if err != nil {
		return rep, err
	}
	if n == 0 {
		return rep, fmt.Errorf("gpumem: %s: the library loaded but reports no device: %w", b.Name(), gpumem.ErrNoDevice)
	}
	attr := func(dev int, a gpumem.Attribute) int {
		v, err := b.DeviceAttribute(dev, a)
		if err != nil {
			return 0
		}
		return v
	}
	for dev := 0; dev < n; dev++ {
		d := deviceInfo{Index: dev}
		var errs []error
		name, err := b.DeviceName(dev)
		errs = append(errs, err)
		d.Name = name
		d.FreeBytes, d.TotalBytes, err = b.MemInfo(dev)
		errs = append(errs, err)
		if major, err := b.DeviceAttribute(dev, gpumem.AttrComputeCapabilityMajor); err == nil {
			d.ComputeCapability = fmt.Sprintf("%d.%d", major, attr(dev, gpumem.AttrComputeCapabilityMinor))
		}
		d.Multiprocessors = attr(dev, gpumem.AttrMultiprocessorCount)
		d.Managed = attr(dev, gpumem.AttrManagedMemory) != 0
		d.ConcurrentManaged = attr(dev, gpumem.AttrConcurrentManagedAccess) != 0
		d.Pools = attr(dev, gpumem.AttrMemoryPoolsSupported) != 0
		d.VMM = attr(dev, gpumem.AttrVirtualMemoryManagement) != 0
		if err := errors.Join(errs...); err != nil {
			d.Error = err.Error()
		}
		rep.Devices = append(rep.Devices, d)
	}
	rep.PeerAccess = make([][]bool, n)
	for i := range rep.PeerAccess {
		rep.PeerAccess[i] = make([]bool, n)
		for j := range rep.PeerAccess[i] {
			if i == j {
				rep.PeerAccess[i][j] = true
				continue
			}
			ok, err := b.CanAccessPeer(i, j)
			rep.PeerAccess[i][j] = err == nil && ok
		}
	}
	gatherTelemetry(b, &rep)
	if sc, ok := b.(interface{ ShortCalls() (on, has bool) }); ok {
		if on, has := sc.ShortCalls(); has {
			rep.ShortCalls = &on
		}
	}
	return rep, nil
}

func printInfo(w io.Writer, rep infoReport) {
	fmt.Fprintf(w, "backend  %s\n", rep.Backend)
	if rep.Library != "" {
		fmt.Fprintf(w, "library  %s\n", rep.Library)
	}
	if rep.DriverVersion != 0 {
		fmt.Fprintf(w, "driver   %s (runtime %s)\n", versionString(rep.Backend, rep.DriverVersion), versionString(rep.Backend, rep.RuntimeVersion))
	}
	if c := rep.Compiler; c != nil {
		if c.Error != "" {
			fmt.Fprintf(w, "compiler %s: not found (%s)\n", c.Name, c.Error)
		} else {
			fmt.Fprintf(w, "compiler %s %s (%s)\n", c.Name, c.Version, c.Library)
		}
	}
	if rep.ShortCalls != nil {
		if *rep.ShortCalls {
			fmt.Fprintln(w, "calls    short for the stream-ordered pool (GPUMEM_SHORT_CALLS=0 makes them ordinary)")
		} else {
			fmt.Fprintln(w, "calls    ordinary (short calls held off: GPUMEM_SHORT_CALLS=0, or a callback registered)")
		}
	}
	if len(rep.Devices) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tname\ttotal\tfree\tcc\tSMs\tmanaged\tpools\tvmm")
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	for _, d := range rep.Devices {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.Index, d.Name,
			gpumem.FormatBytes(d.TotalBytes), gpumem.FormatBytes(d.FreeBytes), orDash(d.ComputeCapability),
			d.Multiprocessors, yn(d.Managed), yn(d.Pools), yn(d.VMM))
	}
	tw.Flush()
	if len(rep.PeerAccess) > 1 {
		fmt.Fprintln(w, "\npeer access (row can access column):")
		for i, row := range rep.PeerAccess {
			fmt.Fprintf(w, "  %d:", i)
			for _, ok := range row {
				if ok {
					fmt.Fprint(w, " Y")
				} else {
					fmt.Fprint(w, " .")
				}
			}
			fmt.Fprintln(w)
		}
	}
	printTelemetry(w, rep)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// versionString decodes a version number in the backend's numbering
// (Registration.FormatVersion: CUDA's 1000*major + 10*minor, HIP's
// 10000000*major + 100000*minor + patch), with the number after it.
func versionString(backend string, v int) string {
	if v <= 0 {
		return "unknown"
	}
	if r, ok := gpumem.Lookup(backend); ok && r.FormatVersion != nil {
		if s := r.FormatVersion(v); s != "" {
			return fmt.Sprintf("%s (%d)", s, v)
		}
	}
	return fmt.Sprint(v)
}
