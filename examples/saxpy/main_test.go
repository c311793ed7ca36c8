package main

import (
	"bytes"
	"os"
	"testing"
)

// The program runs on the simulator, with the default allocator and with
// each one the environment can ask for, and prints the checked value.
func TestRunOnSimulator(t *testing.T) {
	for _, conf := range []string{"", "backend:caching", "backend:asyncpool", "backend:managed"} {
		t.Setenv("GPUMEM_BACKEND", "")
		t.Setenv("GPUMEM_ALLOC_CONF", conf)
		var out bytes.Buffer
		if err := run(&out); err != nil {
			t.Fatalf("conf %q: %v", conf, err)
		}
		if want := "saxpy on sim: 65536 elements checked, y[65535] = 196605\n"; out.String() != want {
			t.Errorf("conf %q: %q, want %q", conf, out.String(), want)
		}
	}
}

// The README shows this program as it is.
func TestREADMEShowsTheProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	body := src[bytes.Index(src, []byte("package main")):]
	if !bytes.Contains(readme, body) {
		t.Error("README.md's saxpy program differs from examples/saxpy/main.go")
	}
}
