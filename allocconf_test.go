package gpumem

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestConfErrorSource checks that a configuration error names where the
// configuration came from: the environment for NewAllocatorFromEnv, the
// source ConfFrom gives, and a neutral label for a string passed in.
func TestConfErrorSource(t *testing.T) {
	base := &ConfError{Key: "bogus", Value: "1", Reason: "unknown key"}
	if got, want := base.Error(), "gpumem: allocator configuration: bogus:1: unknown key"; got != want {
		t.Errorf("no source: %q, want %q", got, want)
	}

	flagged := ConfFrom(base, "--conf")
	if got, want := flagged.Error(), "gpumem: --conf: bogus:1: unknown key"; got != want {
		t.Errorf("ConfFrom: %q, want %q", got, want)
	}
	if base.Source != "" {
		t.Errorf("ConfFrom changed the original: Source %q", base.Source)
	}
	if !errors.Is(flagged, ErrInvalidValue) {
		t.Error("a relabelled error no longer matches ErrInvalidValue")
	}

	// Wrapped: the message keeps the wrapper's words, with the new label,
	// and As finds the relabelled error.
	wrapped := fmt.Errorf("caching: building: %w", base)
	re := ConfFrom(wrapped, AllocConfEnv)
	if got, want := re.Error(), "caching: building: gpumem: GPUMEM_ALLOC_CONF: bogus:1: unknown key"; got != want {
		t.Errorf("wrapped: %q, want %q", got, want)
	}
	var ce *ConfError
	if !errors.As(re, &ce) || ce.Source != AllocConfEnv || ce.Key != "bogus" {
		t.Errorf("As on the relabelled chain: %+v", ce)
	}
	if !errors.Is(re, ErrInvalidValue) {
		t.Error("the relabelled chain no longer matches ErrInvalidValue")
	}

	// Not a configuration error, or nil: unchanged.
	other := errors.New("no device")
	if ConfFrom(other, "--conf") != other || ConfFrom(nil, "--conf") != nil {
		t.Error("ConfFrom changed an error that is not a configuration error")
	}

	// The environment's allocator names the variable.
	t.Setenv(AllocConfEnv, "bogus_key")
	_, err := NewAllocatorFromEnv(nil)
	if err == nil || !strings.Contains(err.Error(), AllocConfEnv+": bogus_key") {
		t.Errorf("NewAllocatorFromEnv: %v, want it to name %s", err, AllocConfEnv)
	}
}
