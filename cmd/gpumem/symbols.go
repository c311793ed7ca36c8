package main

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/gpumem/gpumem"
)

const symbolsUsage = "usage: gpumem symbols [--backend cuda|hip] [--library PATH] [--json]\n"

func cmdSymbols(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("symbols", symbolsUsage, stderr)
	backend := fs.String("backend", "cuda", "vendor: cuda or hip")
	library := fs.String("library", "", "library file to resolve against (default: the usual names)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return fail(stderr, symbolsUsage, usagef("symbols takes no arguments (got %q)", pos))
	}
	if *backend != "cuda" && *backend != "hip" {
		return fail(stderr, symbolsUsage, usagef("symbols: --backend must be cuda or hip (got %q)", *backend))
	}
	resolve, ok := symbolTables[*backend]
	if !ok {
		linked := make([]string, 0, len(symbolTables))
		for k := range symbolTables {
			linked = append(linked, k)
		}
		sort.Strings(linked)
		return fail(stderr, symbolsUsage, fmt.Errorf("gpumem: the %s backend is not linked into this build (linked: %v): %w", *backend, linked, gpumem.ErrNotSupported))
	}
	rep, err := resolve(*library)
	if err != nil {
		return fail(stderr, symbolsUsage, err)
	}
	if *asJSON {
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
