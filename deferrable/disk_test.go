package deferrable_test

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/deferrable"
)

// emptyDir fails the test if dir has any entry.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("the disk tier is visible in %s: %v", dir, ents)
	}
}

// TestDiskTierUnnamed spills to disk with the file opened by O_TMPFILE (where
// the test's file system has it, else by the fallback) and with the fallback
// forced: the directory shows nothing while the manager is open, and the data
// comes back.
func TestDiskTierUnnamed(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		name := "tmpfile"
		if fallback {
			name = "create-then-unlink"
		}
		t.Run(name, func(t *testing.T) {
			if fallback {
				defer deferrable.SetOpenTmpfile(func(string) (*os.File, error) { return nil, errors.ErrUnsupported })()
			}
			g := newSim(t, 1<<30, false)
			dir := t.TempDir()
			m := newManager(t, g, deferrable.Options{DiskDir: dir, StagingBytes: mib})
			unnamed := deferrable.DiskFileUnnamed(m)
			switch {
			case fallback && unnamed:
				t.Fatal("the disk file is unnamed with O_TMPFILE unavailable")
			case !fallback && !unnamed && runtime.GOOS == "linux":
				t.Logf("the file system of %s has no O_TMPFILE: the fallback was taken", dir)
			}
			s := newStream(t, g)
			b, err := m.Alloc(3*mib+5, s)
			if err != nil {
				t.Fatal(err)
			}
			want := pattern(7, b.Size())
			write(t, g, b, s, want)
			if err := b.MoveTo(deferrable.TierDisk); err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS == "linux" || unnamed {
				emptyDir(t, dir)
			}
			if got := read(t, g, b, s); !bytes.Equal(got, want) {
				t.Fatal("the buffer came back from disk changed")
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			emptyDir(t, dir)
			checkLeaks(t, g)
		})
	}
}

// TestDiskFullFailsAtAllocation makes the disk full (the space reservation
// fails with ENOSPC): every way to the disk tier fails before copying, with
// an error matching ErrDiskFull, gpumem.ErrOutOfMemory and ENOSPC, and the
// buffer stays where it was, whole.
func TestDiskFullFailsAtAllocation(t *testing.T) {
	g := newSim(t, 1<<30, false)
	m := newManager(t, g, deferrable.Options{DiskDir: t.TempDir(), HostLimit: 4 * mib, StagingBytes: mib})
	s := newStream(t, g)
	dev, err := m.Alloc(2*mib, s)
	if err != nil {
		t.Fatal(err)
	}
	host, err := m.Alloc(3*mib, s)
	if err != nil {
		t.Fatal(err)
	}
	wantDev, wantHost := pattern(1, dev.Size()), pattern(2, host.Size())
	write(t, g, dev, s, wantDev)
	write(t, g, host, s, wantHost)
	if err := host.MoveTo(deferrable.TierHost); err != nil {
		t.Fatal(err)
	}

	calls := 0
	restore := deferrable.SetReserveSpace(func(f *os.File, off, n int64) error {
		calls++
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: syscall.ENOSPC}
	})
	defer restore()
	diskFull := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error with the disk full", what)
		}
		for _, target := range []error{deferrable.ErrDiskFull, gpumem.ErrOutOfMemory, syscall.ENOSPC} {
			if !errors.Is(err, target) {
				t.Errorf("%s: %v does not match %v", what, err, target)
			}
		}
	}
	diskFull("device to disk", dev.MoveTo(deferrable.TierDisk))
	where(t, dev, deferrable.TierDevice)
	diskFull("host to disk", host.MoveTo(deferrable.TierDisk))
	where(t, host, deferrable.TierHost)
	// The host tier holds 3 MiB of 4: a spill of dev must go to disk.
	freed, err := m.Spill(dev.Size())
	diskFull("spill", err)
	if freed != 0 {
		t.Errorf("spill freed %d bytes with the disk full", freed)
	}
	where(t, dev, deferrable.TierDevice)
	if calls < 3 {
		t.Errorf("the space reservation was asked %d times, want 3 or more", calls)
	}
	st := m.Stats()
	if st.Disk.Buffers != 0 || st.Disk.Bytes != 0 {
		t.Errorf("disk tier after the failures: %+v", st.Disk)
	}

	restore()
	if err := dev.MoveTo(deferrable.TierDisk); err != nil {
		t.Fatalf("with room again: %v", err)
	}
	if got := read(t, g, dev, s); !bytes.Equal(got, wantDev) {
		t.Error("the device buffer changed")
	}
	if got := read(t, g, host, s); !bytes.Equal(got, wantHost) {
		t.Error("the host buffer changed")
	}
	closeChecked(t, m, g)
}
