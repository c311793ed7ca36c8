package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/rtc"
)

var symbolsUsage = "usage: gpumem symbols [--table " + strings.Join(tableNames(), "|") + "] [--backend " + strings.Join(backendNames(true), "|") + "] [--library PATH] [--json]\n"

func cmdSymbols(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("symbols", symbolsUsage, stdout, stderr)
	vendors := backendNames(true)
	def := ""
	if len(vendors) > 0 {
		def = vendors[0]
	}
	backend := fs.String("backend", def, "vendor: "+strings.Join(vendors, " or "))
	library := fs.String("library", "", "library file to resolve against (default: the usual names)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	table := fs.String("table", "driver", "table: "+strings.Join(tableNames(), ", ")+" (driver: the driver's or runtime's; nvrtc, hiprtc: the run-time compilers; the rest: bound libraries)")
	pos, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return fail(stderr, symbolsUsage, usagef("symbols takes no arguments (got %q)", pos))
	}
	switch *table {
	case "driver":
	case rtc.NVRTC, rtc.HIPRTC:
		b := ""
		if isSet(fs, "backend") {
			b = *backend
		}
		return symbolsRTC(*table, b, *library, *asJSON, stdout, stderr)
	default:
		bd, ok := bind.Lookup(*table)
		if !ok {
			return fail(stderr, symbolsUsage, usagef("symbols: --table must be %s (got %q)", strings.Join(tableNames(), ", "), *table))
		}
		return symbolsBound(bd, *backend, *library, *asJSON, stdout, stderr)
	}
	reg, ok := gpumem.Lookup(*backend)
	if !ok || reg.Symbols == nil {
		return fail(stderr, symbolsUsage, usagef("symbols: --backend must be %s (got %q)", strings.Join(vendors, " or "), *backend))
	}
	rep, err := reg.Symbols(*library)
	if err != nil {
		return fail(stderr, symbolsUsage, err)
	}
	return writeSymbols(stdout, stderr, rep, *asJSON)
}

// tableNames are the tables the symbols command checks: the driver's, the
// run-time compilers' and every registered binding's.
func tableNames() []string {
	return append([]string{"driver", rtc.NVRTC, rtc.HIPRTC}, bind.Bindings()...)
}

// symbolsBound checks a bound library's table for one vendor: exit 0 when
// every required symbol resolved, 1 when some are missing, 2 when no file
// of the library loads (as for the other tables).
func symbolsBound(bd bind.Binding, backend, library string, asJSON bool, stdout, stderr io.Writer) int {
	var v bind.Vendor
	switch backend {
	case bind.CUDA.String():
		v = bind.CUDA
	case bind.HIP.String():
		v = bind.HIP
	default:
		return fail(stderr, symbolsUsage, usagef("symbols: --table %s needs --backend cuda or hip (got %q)", bd.Name, backend))
	}
	var opts []bind.Option
	if library != "" {
		opts = append(opts, bind.WithPath(library))
	}
	rep, err := bd.Resolve(v, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "gpumem: symbols: %v\n", err)
		return exitUsage
	}
	return writeSymbols(stdout, stderr, rep, asJSON)
}

// writeSymbols writes rep as JSON or a table and returns the exit status:
// exitFail, saying so, when required symbols are missing.
func writeSymbols(stdout, stderr io.Writer, rep gpumem.SymbolReport, asJSON bool) int {
	if asJSON {
		printJSON(stdout, rep)
	} else {
		printSymbols(stdout, rep)
	}
	if rep.MissingRequired > 0 {
		fmt.Fprintf(stderr, "gpumem: %s: %d required symbols missing\n", rep.Library, rep.MissingRequired)
		return exitFail
	}
	return exitOK
}

func printSymbols(w io.Writer, rep gpumem.SymbolReport) {
	fmt.Fprintf(w, "backend  %s\nlibrary  %s\n", rep.Backend, rep.Library)
	if rep.Version != "" {
		fmt.Fprintf(w, "version  %s\n", rep.Version)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "operation\tsymbol\tresolved\trequired\tnotes")
	resolved := 0
	for _, r := range rep.Rows {
		res, req := "no", ""
		if r.Resolved {
			res = "yes"
			resolved++
		}
		if r.Required {
			req = "required"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Symbol, res, req, r.Notes)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d of %d symbols resolved; %d required missing\n", resolved, len(rep.Rows), rep.MissingRequired)
}
