package gpumem

import (
	"errors"
	"strings"
	"testing"
)

// fakeBackend is a Backend that only has a name and the library it was
// opened with; Open never calls its other methods.
type fakeBackend struct {
	Backend
	name, library string
}

func (f *fakeBackend) Name() string    { return f.name }
func (f *fakeBackend) Library() string { return f.library }

// withRegistry runs the test with only regs registered (and restores the
// process's registry after it).
func withRegistry(t *testing.T, regs ...Registration) {
	t.Helper()
	registryMu.Lock()
	saved := registry
	registry = map[string]Registration{}
	registryMu.Unlock()
	t.Cleanup(func() {
		registryMu.Lock()
		registry = saved
		registryMu.Unlock()
	})
	for _, r := range regs {
		Register(r)
	}
}

// fake registers a backend that opens when its library is "ok" (or, when
// noDevice, fails as a loaded library with no device does), and otherwise
// fails as a missing library does.
func fake(name, env string, order int, opened *[]string) Registration {
	return Registration{
		Name: name, LibraryEnv: env, AutoOrder: order,
		Open: func(library string) (Backend, error) {
			*opened = append(*opened, name+":"+library)
			switch library {
			case "ok":
				return &fakeBackend{name: name, library: library}, nil
			case "nodevice":
				return nil, &Error{Backend: name, Op: "init", Err: ErrNoDevice}
			}
			return nil, &LoadError{Tried: []LoadAttempt{{Name: name + ".so", Message: "not found"}}}
		},
	}
}

// Open names no backend: the environment variable and the auto order come
// from each registration.
func TestOpenReadsRegistrations(t *testing.T) {
	var opened []string
	withRegistry(t,
		fake("beta", "GPUMEM_TEST_BETA_LIBRARY", 2, &opened),
		fake("alpha", "GPUMEM_TEST_ALPHA_LIBRARY", 1, &opened),
		fake("gamma", "", 0, &opened), // never tried by auto
	)
	t.Setenv("GPUMEM_BACKEND", "")
	t.Setenv("GPUMEM_TEST_ALPHA_LIBRARY", "missing")
	t.Setenv("GPUMEM_TEST_BETA_LIBRARY", "ok")

	b, err := Open(Options{})
	if err != nil || b.Name() != "beta" || b.Library() != "ok" {
		t.Fatalf("auto: %v, %v", b, err)
	}
	if got, want := strings.Join(opened, " "), "alpha:missing beta:ok"; got != want {
		t.Errorf("auto tried %q, want %q", got, want)
	}

	// An explicit library wins over the variable; a name is case-insensitive.
	opened = nil
	if b, err := Open(Options{Backend: " ALPHA ", Library: "ok"}); err != nil || b.Library() != "ok" {
		t.Errorf("alpha with a library: %v, %v", b, err)
	}
	// GPUMEM_BACKEND chooses when Options do not.
	t.Setenv("GPUMEM_BACKEND", "gamma")
	if _, err := Open(Options{}); !errors.Is(err, ErrLibraryNotFound) {
		t.Errorf("gamma from the environment: %v", err)
	}
	if got, want := strings.Join(opened, " "), "alpha:ok gamma:"; got != want {
		t.Errorf("opened %q, want %q", got, want)
	}
}

// The auto order's error: an *OpenError naming each backend tried, matching
// ErrLibraryNotFound only when no library loaded and ErrNoDevice when one
// loaded with no device.
func TestOpenAutoErrors(t *testing.T) {
	var opened []string
	withRegistry(t,
		fake("alpha", "GPUMEM_TEST_ALPHA_LIBRARY", 1, &opened),
		fake("beta", "GPUMEM_TEST_BETA_LIBRARY", 2, &opened),
		fake("gamma", "", 0, &opened),
	)
	t.Setenv("GPUMEM_BACKEND", "auto")
	t.Setenv("GPUMEM_TEST_ALPHA_LIBRARY", "")
	t.Setenv("GPUMEM_TEST_BETA_LIBRARY", "")
	_, err := Open(Options{})
	var oe *OpenError
	if !errors.As(err, &oe) || len(oe.Tried) != 2 {
		t.Fatalf("auto with no library: %v", err)
	}
	if !errors.Is(err, ErrLibraryNotFound) || errors.Is(err, ErrNoDevice) {
		t.Errorf("no library anywhere: %v", err)
	}
	t.Setenv("GPUMEM_TEST_BETA_LIBRARY", "nodevice")
	_, err = Open(Options{})
	if errors.Is(err, ErrLibraryNotFound) || !errors.Is(err, ErrNoDevice) {
		t.Errorf("beta loaded with no device: %v", err)
	}
	if _, err := Open(Options{Library: "ok"}); !errors.Is(err, ErrInvalidValue) || !strings.Contains(err.Error(), "(alpha or beta)") {
		t.Errorf("auto with a library: %v", err)
	}
	if _, err := Open(Options{Backend: "delta"}); !errors.Is(err, ErrInvalidValue) || !strings.Contains(err.Error(), "want alpha, beta, gamma or auto") {
		t.Errorf("unknown backend: %v", err)
	}
}

// With no backend that auto may try, auto says how to link one.
func TestOpenAutoNothingLinked(t *testing.T) {
	var opened []string
	withRegistry(t, fake("gamma", "", 0, &opened))
	_, err := Open(Options{Backend: "auto"})
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.Is(oe.Tried[0], ErrNotSupported) || len(opened) != 0 {
		t.Errorf("auto with nothing to try: %v (opened %v)", err, opened)
	}
	// The error says "not supported" and matches ErrNotSupported.
	if !errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNoDevice) {
		t.Errorf("auto with nothing to try: %v does not match ErrNotSupported alone", err)
	}
}

func TestRegisterRejectsMistakes(t *testing.T) {
	withRegistry(t)
	for _, r := range []Registration{
		{Name: "", Open: func(string) (Backend, error) { return nil, nil }},
		{Name: "Upper", Open: func(string) (Backend, error) { return nil, nil }},
		{Name: "auto", Open: func(string) (Backend, error) { return nil, nil }},
		{Name: "nil-open"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%+v) did not panic", r)
				}
			}()
			Register(r)
		}()
	}
}
