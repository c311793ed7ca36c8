package tests

// The GPU tier of telemetry (scripts/gpu/run.sh telemetry): NVML's reading
// of this process's memory against what the caching allocator holds, and
// of another process's.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/driver"
	"github.com/gpumem/gpumem/telemetry"
)

const telemetryChildEnv = "GPUMEM_TELEMETRY_CHILD"

// TestGPUTelemetryChild is the other process of TestGPUTelemetry: it
// allocates 1 GiB through the driver, says "ready", and holds it until
// its standard input closes.
func TestGPUTelemetryChild(t *testing.T) {
	if os.Getenv(telemetryChildEnv) == "" {
		t.Skip("the child of TestGPUTelemetry")
	}
	b, err := driver.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.Malloc(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ready pid=%d\n", os.Getpid())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = b.Free(0, p)
}

func TestGPUTelemetry(t *testing.T) {
	if os.Getenv(telemetryChildEnv) != "" {
		t.Skip("in the child")
	}
	b := openGPU(t, "cuda")
	defer b.Close()
	tel, err := telemetry.Open(b)
	if err != nil {
		t.Fatalf("telemetry.Open on a CUDA device: %v", err)
	}
	defer tel.Close()
	t.Logf("telemetry %s (%s), notes %v", tel.Backend(), tel.Library(), tel.Notes())
	for dev := 0; dev < tel.DeviceCount(); dev++ {
		s, err := tel.Device(dev)
		if err != nil {
			t.Fatalf("device %d: %v", dev, err)
		}
		_, total, _ := b.MemInfo(dev)
		t.Logf("device %d: %+v", dev, s)
		if s.MemoryTotal != total {
			// NVML's total and the driver's may differ by reserved memory;
			// report, do not fail.
			t.Logf("device %d: NVML total %d, cuMemGetInfo total %d", dev, s.MemoryTotal, total)
		}
	}

	a, err := caching.New(b, caching.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// The context exists (the backend retains it); a small allocation makes
	// sure the driver has set the process up on device 0.
	small, err := a.Allocate(1<<20, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	reserved0 := uint64(a.Stats(0).ReservedBytes[gpumem.StatAll].Current)
	self0, listed0, err := tel.Self(0)
	if err != nil {
		t.Fatal(err)
	}
	s0, _ := tel.Device(0)
	p, err := a.Allocate(2<<30, gpumem.Stream{})
	if err != nil {
		t.Fatal(err)
	}
	reserved1 := uint64(a.Stats(0).ReservedBytes[gpumem.StatAll].Current)
	self1, listed1, _ := tel.Self(0)
	s1, _ := tel.Device(0)
	grew := reserved1 - reserved0
	summary := fmt.Sprintf("telemetry: self_listed=%v self_before=%d self_after=%d reserved_before=%d reserved_after=%d context=%d used_before=%d used_after=%d",
		listed0 && listed1, self0, self1, reserved0, reserved1, int64(self0)-int64(reserved0), s0.MemoryUsed, s1.MemoryUsed)
	fmt.Println(summary)
	const slack = 16 << 20 // NVML's granularity and the driver's own bookkeeping
	if listed0 && listed1 {
		if d := int64(self1-self0) - int64(grew); d < -slack || d > slack {
			t.Errorf("this process's memory grew by %d, the allocator's reserve by %d (off by %d)", self1-self0, grew, d)
		}
	} else {
		t.Logf("NVML does not list this process (pid %d; a container's PID namespace?): checking the device's used memory instead", os.Getpid())
		if d := int64(s1.MemoryUsed-s0.MemoryUsed) - int64(grew); d < -slack || d > slack {
			t.Errorf("device memory grew by %d, the allocator's reserve by %d", s1.MemoryUsed-s0.MemoryUsed, grew)
		}
	}

	// Another process holding 1 GiB.
	before, beforeProcs, _ := tel.Others(0)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestGPUTelemetryChild$", "-test.v")
	cmd.Env = append(os.Environ(), telemetryChildEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the child ended without allocating")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not allocate in 60 s")
	}
	var others uint64
	var procs []telemetry.Process
	childListed := false
	for i := 0; i < 50 && !childListed; i++ { // NVML's process list may lag
		others, procs, _ = tel.Others(0)
		for _, p := range procs {
			if p.PID == cmd.Process.Pid {
				childListed = true
			}
		}
		if !childListed {
			time.Sleep(100 * time.Millisecond)
		}
	}
	var childBytes uint64
	for _, p := range procs {
		if p.PID == cmd.Process.Pid {
			childBytes = p.UsedBytes
		}
	}
	fmt.Printf("telemetry: child_pid=%d child_listed=%v child_bytes=%d others_before=%d (%v) others_after=%d (%v)\n",
		cmd.Process.Pid, childListed, childBytes, before, beforeProcs, others, procs)
	if childListed {
		if childBytes < 1<<30 {
			t.Errorf("the child holds %d bytes by NVML, less than the 1 GiB it allocated", childBytes)
		}
	} else {
		t.Logf("NVML does not list the child by its PID %d (a container's PID namespace?)", cmd.Process.Pid)
		if others < before+1<<30 {
			t.Errorf("other processes' memory went from %d to %d with a child holding 1 GiB", before, others)
		}
	}

	// An out-of-memory error now names the other processes' memory.
	_, total, _ := b.MemInfo(0)
	_, err = a.Allocate(total, gpumem.Stream{})
	var oom *gpumem.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("Allocate(total): %v", err)
	}
	fmt.Printf("telemetry: oom_others=%v\n", oom.Others)
	t.Logf("out-of-memory error: %v", err)
	if oom.Others == nil || (childListed && oom.Others.Bytes < 1<<30) {
		t.Errorf("the out-of-memory error's Others: %v", oom.Others)
	}
	_ = a.Deallocate(p, gpumem.Stream{})
	_ = a.Deallocate(small, gpumem.Stream{})
}
