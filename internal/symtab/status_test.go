package symtab

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

func TestStatusTablesSortedAndUnique(t *testing.T) {
	for v, tab := range Statuses {
		if tab.Vendor != Vendor(v) {
			t.Errorf("Statuses[%d] is %s's table", v, tab.Vendor)
		}
		names := map[string]bool{}
		for i, s := range tab.Statuses {
			if i > 0 && s.Code <= tab.Statuses[i-1].Code {
				t.Errorf("%s: %s (%d) out of order", tab.Vendor, s.Name, s.Code)
			}
			if s.Name == "" || names[s.Name] {
				t.Errorf("%s: code %d: name %q missing or repeated", tab.Vendor, s.Code, s.Name)
			}
			names[s.Name] = true
			if got, ok := tab.Lookup(s.Code); !ok || got.Name != s.Name || tab.Name(s.Code) != s.Name || tab.Code(s.Name) != s.Code {
				t.Errorf("%s: lookups of %s (%d) disagree", tab.Vendor, s.Name, s.Code)
			}
		}
	}
}

// Each entry's sentinel, before and after the backend is closed.
func TestStatusSentinels(t *testing.T) {
	for _, tab := range Statuses {
		for _, s := range tab.Statuses {
			if got := tab.Sentinel(s.Code, false); got != s.Err {
				t.Errorf("%s: %s open: %v, want %v", tab.Vendor, s.Name, got, s.Err)
			}
			want := s.Err
			if s.Closed {
				want = gpumem.ErrClosed
			}
			if got := tab.Sentinel(s.Code, true); !errors.Is(got, want) || (want == nil) != (got == nil) {
				t.Errorf("%s: %s closed: %v, want %v", tab.Vendor, s.Name, got, want)
			}
			if s.Code == 0 && s.Err != nil {
				t.Errorf("%s: success has a sentinel", tab.Vendor)
			}
		}
		if tab.Sentinel(123456, true) != nil || tab.Name(123456) != "" {
			t.Errorf("%s: an unknown code has a sentinel or a name", tab.Vendor)
		}
	}
	for code, want := range map[int]error{2: gpumem.ErrOutOfMemory, 100: gpumem.ErrNoDevice, 801: gpumem.ErrNotSupported,
		1: gpumem.ErrInvalidValue, 400: gpumem.ErrInvalidValue, 101: gpumem.ErrInvalidValue, 999: nil,
		900: gpumem.ErrInvalidValue, 905: gpumem.ErrInvalidValue, 908: gpumem.ErrInvalidValue, 909: nil, 600: nil, 704: nil} {
		for _, tab := range Statuses {
			if got := tab.Sentinel(code, false); got != want {
				t.Errorf("%s: Sentinel(%d) = %v, want %v", tab.Vendor, code, got, want)
			}
		}
	}
}

// The codes the shared implementation compares with are numbered alike by
// both vendors.
func TestSharedStatusCodes(t *testing.T) {
	for _, c := range []struct {
		cuda, hip string
	}{
		{"CUDA_ERROR_NOT_READY", "hipErrorNotReady"},
		{"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "hipErrorPeerAccessAlreadyEnabled"},
		{"CUDA_ERROR_NOT_INITIALIZED", "hipErrorNotInitialized"},
		{"CUDA_ERROR_DEINITIALIZED", "hipErrorDeinitialized"},
	} {
		if a, b := Statuses[CUDA].Code(c.cuda), Statuses[HIP].Code(c.hip); a != b {
			t.Errorf("%s is %d but %s is %d", c.cuda, a, c.hip, b)
		}
	}
}
