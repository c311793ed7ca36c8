// Command gpumem inspects GPUs through the project's backends and replays
// allocation traces through its allocators.
//
//	gpumem info    [--backend B] [--library PATH] [--sim-devices N] [--json]
//	gpumem symbols [--table driver|nvrtc|hiprtc] [--backend cuda|hip] [--library PATH] [--json]
//	gpumem replay  [--backend B] [--allocator caching|asyncpool|managed] [--conf CONF]
//	               [--sim-capacity BYTES] [--sim-devices N] [--html FILE] [--json]
//	               [--profile] [--verbose] [TRACE|SNAPSHOT|-...]
//	gpumem convert [--device N] [-o OUT] SNAPSHOT|-
//	gpumem compile [--backend cuda|hip] [--library PATH] [--arch TARGET] [-o OUT] FILE
//	gpumem version [--json]
//
// info describes the devices a backend sees; symbols resolves a vendor
// library's symbol table without initialising it; replay runs traces
// through allocators and compares them (a PyTorch memory snapshot is
// accepted wherever a trace is); convert turns a PyTorch memory snapshot
// into a trace file. With no trace, replay uses the bundled trace (recorded
// from PyTorch); with no --allocator (and no backend key in the
// configuration) it runs every allocator linked in. Its backend defaults to
// auto: a real GPU if one opens, else the simulator, and it says so.
//
// Exit status: 0 success; 1 failure; 2 usage error or no vendor library
// could be loaded; 3 the library loaded but found no device.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/gpumem/gpumem"
)

// Exit statuses.
const (
	exitOK       = 0
	exitFail     = 1
	exitUsage    = 2 // also: no library could be loaded
	exitNoDevice = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: gpumem <command> [flags]

commands:
  info      describe the devices a backend sees
  symbols   resolve a vendor library's symbol table (no GPU needed)
  replay    replay allocation traces through the allocators
  convert   convert a PyTorch memory snapshot into a trace
  compile   compile a kernel source to PTX (NVRTC) or a code object (hipRTC)
  version   print the build's version (module, VCS revision, Go version)

  gpumem info    [--backend B] [--library PATH] [--sim-devices N] [--json]
  gpumem symbols [--table driver|nvrtc|hiprtc] [--backend cuda|hip] [--library PATH] [--json]
  gpumem replay  [--backend B] [--allocator A] [--conf CONF] [--sim-capacity BYTES]
                 [--sim-devices N] [--html FILE] [--json] [--profile] [--verbose]
                 [TRACE|SNAPSHOT|-...]
  gpumem convert [--device N] [-o OUT] SNAPSHOT|-
  gpumem compile [--backend cuda|hip] [--library PATH] [--arch TARGET] [-o OUT] FILE
  gpumem version [--json]

Run 'gpumem <command> --help' for a command's flags.
`

// run is the whole program, callable in-process by tests. A panic is turned
// into an error message and exit status 1: never a stack trace.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "gpumem: internal error: %v\n", r)
			if os.Getenv("GPUMEM_DEBUG") != "" {
				stderr.Write(debug.Stack())
			}
			code = exitFail
		}
	}()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "info":
		return cmdInfo(rest, stdout, stderr)
	case "symbols":
		return cmdSymbols(rest, stdout, stderr)
	case "replay":
		return cmdReplay(rest, stdout, stderr)
	case "convert":
		return cmdConvert(rest, stdout, stderr)
	case "compile":
		return cmdCompile(rest, stdout, stderr)
	case "version", "--version":
		return cmdVersion(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "gpumem: unknown command %q (see 'gpumem --help')\n", cmd)
		return exitUsage
	}
}

// exitFor maps an error to the exit status the interface promises.
func exitFor(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, gpumem.ErrNoDevice):
		return exitNoDevice
	case errors.Is(err, gpumem.ErrLibraryNotFound):
		return exitUsage
	}
	return exitFail
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// fail prints err in one line and returns its exit status; a usage error
// also names the command's --help (cmdUsage is its usage line).
func fail(stderr io.Writer, cmdUsage string, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		cmd := "gpumem"
		if f := strings.Fields(cmdUsage); len(f) >= 3 && f[0] == "usage:" && f[1] == "gpumem" {
			cmd = "gpumem " + f[2]
		}
		fmt.Fprintf(stderr, "%s: %v (see '%s --help')\n", cmd, err, cmd)
		return exitUsage
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "gpumem") {
		msg = "gpumem: " + msg
	}
	fmt.Fprintln(stderr, msg)
	return exitFor(err)
}
