package tests

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/gpumem/gpumem"

// projectImports maps each package directory of the repository (relative,
// "." for the root) to the project packages its non-test files import.
func projectImports(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..")
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			// Files for other systems only, or a broken package: the
			// build fails elsewhere; here only the layering matters.
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		var deps []string
		for _, imp := range pkg.Imports {
			if imp == module {
				deps = append(deps, ".")
			} else if strings.HasPrefix(imp, module+"/") {
				deps = append(deps, strings.TrimPrefix(imp, module+"/"))
			}
		}
		sort.Strings(deps)
		out[rel] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLayers checks who imports whom, as docs/architecture.md draws it: the
// root imports nothing of the project; the native engine and the backends
// know no allocator; the allocators know no backend but the contract; the
// consumers of allocators (replay, metrics) name none of them; no package
// directory is called vendor.
func TestLayers(t *testing.T) {
	deps := projectImports(t)
	if len(deps) < 20 {
		t.Fatalf("found only %d packages: %v", len(deps), deps)
	}
	allocators := []string{"caching", "asyncpool", "managed", "deferrable"}
	backends := []string{"driver", "hip", "sim"}
	forbid := func(pkg string, bad []string, why string) {
		for _, d := range deps[pkg] {
			for _, b := range bad {
				if d == b || strings.HasPrefix(d, b+"/") {
					t.Errorf("%s imports %s: %s", pkg, d, why)
				}
			}
		}
	}
	for pkg := range deps {
		if base := filepath.Base(pkg); base == "vendor" {
			t.Errorf("package directory %s is named vendor (Go tooling treats it as third-party code)", pkg)
		}
	}
	if len(deps["."]) != 0 {
		t.Errorf("the root package imports %v; it must import nothing of the project", deps["."])
	}
	for _, p := range []string{"replay", "metrics", "config", "trace", "adaptor", "allocatortest"} {
		if _, ok := deps[p]; !ok {
			continue
		}
		forbid(p, allocators, "a consumer of allocators depends on the contract, not on an allocator")
		forbid(p, []string{"driver", "hip"}, "it works over any backend")
	}
	for _, p := range allocators {
		forbid(p, backends, "an allocator works over any backend")
		others := []string{}
		for _, q := range allocators {
			if q != p && !(p == "managed" && q == "caching") {
				others = append(others, q)
			}
		}
		forbid(p, others, "allocators are independent (managed builds on caching's pools only)")
	}
	for _, p := range []string{"driver", "hip", "sim"} {
		forbid(p, allocators, "a backend knows no allocator")
		forbid(p, []string{"replay", "metrics", "cmd"}, "a backend knows no consumer")
	}
	// Bindings of vendor libraries (telemetry, collective, blas) work over
	// any backend through bind (or the simulator's own Go implementation)
	// and know no allocator and no consumer; metrics imports telemetry, not
	// the other way (metrics/telemetrymetrics joins them).
	for _, p := range []string{"telemetry", "collective", "blas"} {
		forbid(p, allocators, "a binding knows no allocator")
		forbid(p, []string{"driver", "hip", "replay", "metrics", "cmd"}, "a binding reaches a backend through bind and knows no consumer")
	}
	for pkg := range deps {
		if strings.HasPrefix(pkg, "internal/") {
			forbid(pkg, allocators, "the internal engine knows no allocator")
		}
	}
}
