package dl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem"
)

const libc = "libc.so.6"

func TestOpenMissingReportsLoaderMessage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libdoes-not-exist.so")
	lib, err := Open(missing, "libgpumem-no-such-soname.so.9")
	if err == nil {
		lib.Close()
		t.Fatal("Open of nonexistent libraries succeeded")
	}
	if lib != nil {
		t.Fatalf("Open returned a library with an error: %+v", lib)
	}
	if !errors.Is(err, gpumem.ErrLibraryNotFound) {
		t.Fatalf("errors.Is(%v, ErrLibraryNotFound) = false", err)
	}
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("error %T is not a *LoadError", err)
	}
	if len(le.Tried) != 2 {
		t.Fatalf("Tried = %+v, want 2 attempts", le.Tried)
	}
	msg := err.Error()
	for _, a := range le.Tried {
		if !strings.Contains(msg, a.Name) {
			t.Errorf("error %q does not name candidate %q", msg, a.Name)
		}
		// glibc's message for a missing file names the file and says why.
		if !strings.Contains(a.Message, "No such file or directory") {
			t.Errorf("attempt %q: message %q is not dlopen's", a.Name, a.Message)
		}
		if !strings.Contains(msg, a.Message) {
			t.Errorf("error %q does not carry the message %q", msg, a.Message)
		}
	}
	if errors.Is(err, gpumem.ErrNotSupported) {
		t.Error("LoadError matches ErrNotSupported")
	}
}

func TestOpenBadNames(t *testing.T) {
	for _, name := range []string{"", "lib\x00c.so.6"} {
		lib, err := Open(name)
		if err == nil {
			lib.Close()
			t.Fatalf("Open(%q) succeeded", name)
		}
		if !errors.Is(err, gpumem.ErrLibraryNotFound) {
			t.Errorf("Open(%q): %v does not match ErrLibraryNotFound", name, err)
		}
	}
	_, err := Open()
	if !errors.Is(err, gpumem.ErrLibraryNotFound) || err.Error() == "" {
		t.Errorf("Open(): %v", err)
	}
}

func TestOpenFallsThroughToWorkingCandidate(t *testing.T) {
	lib, err := Open("libgpumem-no-such-soname.so.9", libc)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if lib.Path != libc {
		t.Errorf("Path = %q, want %q", lib.Path, libc)
	}
	if lib.Handle() == 0 {
		t.Error("Handle() = 0 for an open library")
	}
}

func TestSym(t *testing.T) {
	lib, err := Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	addr, err := lib.Sym("strlen")
	if err != nil || addr == 0 {
		t.Fatalf("Sym(strlen) = %#x, %v", addr, err)
	}
	addr2, err := lib.Sym("strlen")
	if err != nil || addr2 != addr {
		t.Fatalf("Sym(strlen) again = %#x, %v; want %#x", addr2, err, addr)
	}

	for _, name := range []string{"gpumem_no_such_symbol", "", "str\x00len"} {
		addr, err = lib.Sym(name)
		if addr != 0 || err == nil {
			t.Fatalf("Sym(%q) = %#x, %v", name, addr, err)
		}
		if !errors.Is(err, gpumem.ErrNotSupported) {
			t.Errorf("Sym(%q): %v does not match ErrNotSupported", name, err)
		}
		var se *SymbolError
		if !errors.As(err, &se) || se.Symbol != name || se.Library != libc || se.Message == "" {
			t.Errorf("Sym(%q): error %#v", name, err)
		}
	}
	_, err = lib.Sym("gpumem_no_such_symbol")
	if !strings.Contains(err.Error(), "gpumem_no_such_symbol") {
		t.Errorf("error %q does not carry dlsym's message", err)
	}
}

func TestCloseIdempotentAndSymAfterClose(t *testing.T) {
	lib, err := Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := lib.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if lib.Handle() != 0 {
		t.Error("Handle() after Close is not 0")
	}
	addr, err := lib.Sym("strlen")
	if addr != 0 || !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Sym after Close = %#x, %v; want ErrClosed", addr, err)
	}
	var nilLib *Library
	if err := nilLib.Close(); err != nil {
		t.Errorf("nil Close: %v", err)
	}
	if _, err := nilLib.Sym("strlen"); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("nil Sym: %v", err)
	}
}

func TestConcurrentSymAndClose(t *testing.T) {
	lib, err := Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				addr, err := lib.Sym("memcpy")
				if err == nil && addr == 0 {
					t.Error("Sym returned 0 without an error")
				}
				if err != nil && !errors.Is(err, gpumem.ErrClosed) {
					t.Errorf("Sym: %v", err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		lib.Close()
	}()
	wg.Wait()
}

func TestCandidates(t *testing.T) {
	if len(CUDACandidates) == 0 || CUDACandidates[0] != "libcuda.so.1" {
		t.Errorf("CUDACandidates = %v", CUDACandidates)
	}
	if len(HIPCandidates) == 0 || HIPCandidates[0] != "libamdhip64.so" {
		t.Errorf("HIPCandidates = %v", HIPCandidates)
	}
}

func TestSymFirst(t *testing.T) {
	lib, err := Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	want, err := lib.Sym("memcpy")
	if err != nil {
		t.Fatal(err)
	}
	addr, name, err := lib.SymFirst("memcpy_gpumem_v9", "memcpy", "memmove")
	if err != nil || name != "memcpy" || addr != want {
		t.Fatalf("SymFirst = %#x, %q, %v; want %#x, memcpy", addr, name, err, want)
	}
	_, _, err = lib.SymFirst("gpumem_none_v2", "gpumem_none")
	var se *SymbolError
	if !errors.As(err, &se) || se.Symbol != "gpumem_none_v2" || !errors.Is(err, gpumem.ErrNotSupported) {
		t.Fatalf("SymFirst of missing names: %#v", err)
	}
	if !strings.Contains(err.Error(), "gpumem_none_v2") || !strings.Contains(err.Error(), "undefined symbol: gpumem_none;") && !strings.HasSuffix(err.Error(), "gpumem_none") {
		t.Errorf("error %q does not carry each name's message", err)
	}
	if _, _, err := lib.SymFirst(); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Errorf("SymFirst(): %v", err)
	}
	lib.Close()
	if _, _, err := lib.SymFirst("memcpy"); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("SymFirst after Close: %v", err)
	}
}

func TestOpenNotALibrary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libnotelf.so")
	if err := os.WriteFile(path, []byte("this is not an ELF file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	var le *LoadError
	if !errors.As(err, &le) || len(le.Tried) != 1 {
		t.Fatalf("Open of a non-library: %v", err)
	}
	// glibc says why: "invalid ELF header" or "file too short".
	if m := le.Tried[0].Message; !strings.Contains(m, "ELF") && !strings.Contains(m, "too short") {
		t.Errorf("message %q is not the loader's reason", m)
	}
}
