package tests

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/all"
)

// A library that loads but is not the vendor's (the C library) lacks every
// required symbol: the error is a public type that names them and matches
// ErrNotSupported.
func TestMissingSymbolsErrorIsPublic(t *testing.T) {
	for _, backend := range []string{"cuda", "hip"} {
		_, err := gpumem.Open(gpumem.Options{Backend: backend, Library: "libc.so.6"})
		var me *gpumem.MissingSymbolsError
		if !errors.As(err, &me) {
			t.Fatalf("%s on libc.so.6: %v (%T), want a *gpumem.MissingSymbolsError", backend, err, err)
		}
		if me.Backend != backend || me.Library != "libc.so.6" || len(me.Symbols) == 0 {
			t.Errorf("%s: %+v", backend, me)
		}
		if !errors.Is(err, gpumem.ErrNotSupported) {
			t.Errorf("%s: %v does not match ErrNotSupported", backend, err)
		}
	}
}

// A library that does not load is a public *gpumem.LoadError naming each
// candidate, matching ErrLibraryNotFound.
func TestLoadErrorIsPublic(t *testing.T) {
	for _, backend := range []string{"cuda", "hip"} {
		_, err := gpumem.Open(gpumem.Options{Backend: backend, Library: "/nonexistent/libgpumem-none.so"})
		var le *gpumem.LoadError
		if !errors.As(err, &le) {
			t.Fatalf("%s: %v (%T), want a *gpumem.LoadError", backend, err, err)
		}
		if len(le.Tried) != 1 || le.Tried[0].Name != "/nonexistent/libgpumem-none.so" || le.Tried[0].Message == "" {
			t.Errorf("%s: %+v", backend, le)
		}
		if !errors.Is(err, gpumem.ErrLibraryNotFound) {
			t.Errorf("%s: %v does not match ErrLibraryNotFound", backend, err)
		}
	}
}
