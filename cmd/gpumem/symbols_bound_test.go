package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
)

// testBinding is a binding over C's own library, registered for the tests:
// symbols checks it as it checks the shipped ones.
func init() {
	table := bind.NewTable("libc-cli",
		bind.Func{Op: "Strlen", Symbol: bind.Symbols("strlen", "strlen"), Args: bind.Args(1), Required: bind.Both},
		bind.Func{Op: "Optional", Symbol: bind.Symbols("gpumem_no_such_optional", ""), Args: bind.Args(1)},
	)
	needy := bind.NewTable("libc-needy",
		bind.Func{Op: "Needed", Symbol: bind.Symbols("gpumem_no_such_required", "gpumem_no_such_required"), Args: bind.Args(1), Required: bind.Both},
	)
	files := [bind.NumVendors][]string{{"libc.so.6"}, {"libc.so.6"}}
	bind.Register(bind.Binding{Name: "libc-cli", Libraries: [bind.NumVendors][]*bind.Library{
		{{Name: "libc", Files: files, Table: table}},
		{{Name: "libc-needy", Files: files, Table: needy}, {Name: "libc", Files: files, Table: table}},
	}})
}

func TestSymbolsBoundTable(t *testing.T) {
	code, o, e := runCmd(t, "symbols", "--table", "libc-cli", "--backend", "cuda", "--json")
	if code == exitUsage && strings.Contains(e, "libc.so.6") {
		t.Skipf("no libc.so.6: %s", e)
	}
	var rep gpumem.SymbolReport
	if err := json.Unmarshal([]byte(o), &rep); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s %s", code, err, o, e)
	}
	if rep.Backend != "libc" || rep.Library != "libc.so.6" || len(rep.Rows) != 2 || !rep.Rows[0].Resolved || rep.Rows[1].Resolved || rep.MissingRequired != 0 {
		t.Errorf("report %+v", rep)
	}
	// HIP: the first declaration lacks a required symbol, the second is
	// complete and is the one reported.
	code, o, _ = runCmd(t, "symbols", "--table", "libc-cli", "--backend", "hip")
	if code != exitOK || !strings.Contains(o, "backend  libc\n") || !strings.Contains(o, "1 of 1 symbols resolved") {
		t.Errorf("hip: exit %d %q", code, o)
	}
	// A library lacking a required symbol: exit 1 naming the count.
	bind.Register(bind.Binding{Name: "libc-needy", Libraries: [bind.NumVendors][]*bind.Library{{{Name: "libc-needy", Files: [bind.NumVendors][]string{{"libc.so.6"}}, Table: bind.NewTable("n",
		bind.Func{Op: "Needed", Symbol: bind.Symbols("gpumem_no_such_required", ""), Args: bind.Args(1), Required: bind.Both})}}}})
	code, _, e = runCmd(t, "symbols", "--table", "libc-needy", "--backend", "cuda", "--json")
	if code != exitFail || !strings.Contains(e, "1 required symbols missing") {
		t.Errorf("missing required: exit %d %q", code, e)
	}
	// No file: exit 2 naming it.
	missing := filepath.Join(t.TempDir(), "libnothing.so")
	code, _, e = runCmd(t, "symbols", "--table", "libc-cli", "--backend", "cuda", "--library", missing)
	if code != exitUsage || !strings.Contains(e, missing) {
		t.Errorf("missing file: exit %d %q", code, e)
	}
	// A bound table needs a vendor; an unknown table is a usage error.
	if code, _, e := runCmd(t, "symbols", "--table", "libc-cli", "--backend", "sim"); code != exitUsage || !strings.Contains(e, "needs --backend cuda or hip") {
		t.Errorf("sim backend: exit %d %q", code, e)
	}
	if code, _, e := runCmd(t, "symbols", "--table", "nonesuch"); code != exitUsage || !strings.Contains(e, "libc-cli") {
		t.Errorf("unknown table: exit %d %q", code, e)
	}
}
