package backendtest

import (
	"errors"
	"testing"

	"github.com/gpumem/gpumem"
)

func testDevices(t *testing.T, b gpumem.Backend, dev int) {
	if b.Name() == "" {
		t.Error("Name is empty")
	}
	v, err := b.Version()
	must(t, err, "Version")
	if v.Driver <= 0 {
		t.Errorf("Version().Driver = %d", v.Driver)
	}
	n, err := b.DeviceCount()
	must(t, err, "DeviceCount")
	if n < 1 {
		t.Fatalf("DeviceCount = %d", n)
	}
	for dev := 0; dev < n; dev++ {
		name, err := b.DeviceName(dev)
		must(t, err, "DeviceName")
		if name == "" {
			t.Errorf("device %d has an empty name", dev)
		}
		for _, a := range gpumem.Attributes() {
			v, err := b.DeviceAttribute(dev, a)
			if err != nil && !errors.Is(err, gpumem.ErrNotSupported) {
				t.Errorf("DeviceAttribute(%d, %v): %v", dev, a, err)
			}
			if err == nil && v < 0 {
				t.Errorf("DeviceAttribute(%d, %v) = %d", dev, a, v)
			}
		}
		major, err := b.DeviceAttribute(dev, gpumem.AttrComputeCapabilityMajor)
		must(t, err, "compute capability")
		if major < 1 {
			t.Errorf("compute capability major %d", major)
		}
		sms, err := b.DeviceAttribute(dev, gpumem.AttrMultiprocessorCount)
		must(t, err, "multiprocessor count")
		if sms < 1 {
			t.Errorf("multiprocessor count %d", sms)
		}
		free, total, err := b.MemInfo(dev)
		must(t, err, "MemInfo")
		if total == 0 || free > total {
			t.Errorf("MemInfo(%d) = free %d, total %d", dev, free, total)
		}
	}
	if _, err := b.DeviceName(n); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("DeviceName(%d) of %d devices: %v, want ErrInvalidValue", n, n, err)
	}
	if _, _, err := b.MemInfo(-1); !errors.Is(err, gpumem.ErrInvalidValue) {
		t.Errorf("MemInfo(-1): %v, want ErrInvalidValue", err)
	}
	if b.ErrorName(2) == "" {
		t.Error("ErrorName(2) is empty")
	}
	must(t, b.DeviceSynchronize(dev), "DeviceSynchronize")
}

func testClose(t *testing.T, b gpumem.Backend, dev int) {
	must(t, b.Close(), "Close")
	if _, err := b.Malloc(dev, 512); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("Malloc after Close: %v, want ErrClosed", err)
	}
	if _, err := b.DeviceCount(); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("DeviceCount after Close: %v, want ErrClosed", err)
	}
	if _, err := b.StreamCreate(dev, 0, 0); !errors.Is(err, gpumem.ErrClosed) {
		t.Errorf("StreamCreate after Close: %v, want ErrClosed", err)
	}
}
