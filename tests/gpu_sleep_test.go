package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
	"github.com/gpumem/gpumem/trace"
)

// Sleep and wake on a real device: a replayed workload of about
// GPUMEM_SLEEP_GIB GiB (default 40, less where the device has less free)
// through the caching allocator with expandable segments; half of its
// allocations kept. Sleep must free the device memory (a second process
// allocates it, and Wake meanwhile fails and stays asleep); Wake must bring
// the kept contents back byte for byte. The save and restore copies are
// measured against a plain pinned copy of the same size in the same run:
//
//	SLEEP save_GBps=... pinned_d2h_GBps=... restore_GBps=... pinned_h2d_GBps=...
func TestGPUSleepWake(t *testing.T) {
	b := openGPU(t, "cuda")
	defer b.Close()
	free, _, err := b.MemInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	target := uint64(40) << 30
	if s := os.Getenv("GPUMEM_SLEEP_GIB"); s != "" {
		g, err := strconv.ParseFloat(s, 64)
		if err != nil || g <= 0 {
			t.Fatalf("GPUMEM_SLEEP_GIB=%q", s)
		}
		target = uint64(g * (1 << 30))
	}
	// The workload, the reference copy's device buffer (half of it) and
	// room to spare.
	target = min(target, free/2)
	runSleepWorkload(t, b, target, gpuPatternLen, holdInChild(t))
}

// TestGPUSleepChild is the second process of TestGPUSleepWake: with
// GPUMEM_SLEEP_CHILD set to a byte count, it takes that much device memory
// in plain allocations, says HELD, waits for a line on its standard input,
// frees it all and says FREED.
func TestGPUSleepChild(t *testing.T) {
	s := os.Getenv("GPUMEM_SLEEP_CHILD")
	if s == "" {
		t.Skip("the second process of TestGPUSleepWake (GPUMEM_SLEEP_CHILD unset)")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	b := openGPU(t, "cuda")
	defer b.Close()
	var ps []gpumem.Ptr
	var held uint64
	for held < n {
		c := min(uint64(1)<<30, n-held)
		p, err := b.Malloc(0, c)
		if err != nil {
			fmt.Printf("CHILD_ERROR after %d bytes: %v\n", held, err)
			break
		}
		if err := b.Memset(p, 0xee, c); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		held += c
	}
	fmt.Printf("HELD %d\n", held)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	for _, p := range ps {
		if err := b.Free(0, p); err != nil {
			t.Error(err)
		}
	}
	fmt.Println("FREED")
}

// holder takes n bytes of the device elsewhere (another process) and
// returns what it took and how to give it back.
type holder func(n uint64) (held uint64, release func() error, err error)

// holdInChild runs TestGPUSleepChild in a new process of this test binary.
func holdInChild(t *testing.T) holder {
	return func(n uint64) (uint64, func() error, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGPUSleepChild$", "-test.v")
		cmd.Env = append(os.Environ(), "GPUMEM_SLEEP_CHILD="+strconv.FormatUint(n, 10))
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, nil, err
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return 0, nil, err
		}
		r := bufio.NewScanner(out)
		var held uint64
		for r.Scan() {
			line := r.Text()
			t.Logf("child: %s", line)
			if v, ok := strings.CutPrefix(line, "HELD "); ok {
				held, _ = strconv.ParseUint(v, 10, 64)
				break
			}
		}
		release := func() error {
			_, _ = in.Write([]byte("go\n"))
			for r.Scan() {
				t.Logf("child: %s", r.Text())
			}
			return cmd.Wait()
		}
		if held == 0 {
			_ = release()
			return 0, nil, errors.New("the second process held nothing")
		}
		return held, release, nil
	}
}

// sleepBuf is an allocation of the workload; kept ones hold the pattern
// from offset off.
type sleepBuf struct {
	p    gpumem.Ptr
	size uint64
	s    gpumem.Stream
	keep bool
	off  uint64
}

// gpuPatternLen is the length of the fill pattern on a GPU: not a power
// of two, so that every buffer's bytes are shifted differently.
const gpuPatternLen = 64<<20 + 4099

func traceEvents(t *testing.T) []trace.Event {
	for _, p := range []string{os.Getenv("GPUMEM_SLEEP_TRACE"),
		filepath.Join(os.Getenv("GPUMEM_GPU_SHARED"), "traces", "pytorch-gpt.trace.gz"),
		"testdata/pytorch-gpt.trace.gz", "../testdata/pytorch-gpt.trace.gz"} {
		if p == "" {
			continue
		}
		if tr, err := trace.ReadFile(p); err == nil {
			t.Logf("replaying %s", p)
			return tr.Events
		}
	}
	t.Fatal("no trace: set GPUMEM_SLEEP_TRACE to testdata/pytorch-gpt.trace.gz")
	return nil
}

// replayToPeak replays copies of the trace (each on fresh ids, stopping
// where its live bytes peak, the copy's live set kept) until target bytes
// are live. Every other allocation is KeepOnSleep.
func replayToPeak(t *testing.T, a *caching.Allocator, ss []gpumem.Stream, evs []trace.Event, target uint64) []*sleepBuf {
	var peakAt int
	var live, peak uint64
	sizes := map[uint64]uint64{}
	for i, e := range evs {
		if e.Alloc {
			sizes[e.ID] = e.Size
			live += e.Size
		} else {
			live -= sizes[e.ID]
		}
		if live > peak {
			peak, peakAt = live, i
		}
	}
	var all []*sleepBuf
	var total uint64
	n := 0
	for copyN := 0; total < target; copyN++ {
		bufs := map[uint64]*sleepBuf{}
		for _, e := range evs[:peakAt+1] {
			if !e.Alloc {
				if x := bufs[e.ID]; x != nil {
					if err := a.Deallocate(x.p, x.s); err != nil {
						t.Fatal(err)
					}
					total -= x.size
					delete(bufs, e.ID)
				}
				continue
			}
			if total >= target {
				continue
			}
			keep := n%2 == 0
			n++
			tag := caching.DiscardOnSleep
			if keep {
				tag = caching.KeepOnSleep
			}
			s := ss[e.Stream%len(ss)]
			p, err := a.AllocateTagged(e.Size, s, tag)
			if err != nil {
				t.Fatalf("copy %d of the trace, %d bytes live: %v", copyN, total, err)
			}
			bufs[e.ID] = &sleepBuf{p: p, size: e.Size, s: s, keep: keep}
			total += e.Size
		}
		for _, x := range bufs {
			all = append(all, x)
		}
	}
	return all
}

func runSleepWorkload(t *testing.T, b gpumem.Backend, target, patternLen uint64, hold holder) {
	ctx := context.Background()
	opts := caching.DefaultOptions()
	opts.ExpandableSegments = true
	a, err := caching.New(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var ss []gpumem.Stream
	for i := 0; i < 4; i++ {
		s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer b.StreamDestroy(s)
		ss = append(ss, s)
	}
	bufs := replayToPeak(t, a, ss, traceEvents(t), target)

	// The pattern: random bytes on the device, twice in a row so that any
	// window of patternLen bytes is one copy.
	pat := make([]byte, patternLen)
	rand.New(rand.NewSource(7)).Read(pat)
	pat2 := append(append([]byte(nil), pat...), pat...)
	patDev, err := b.Malloc(0, 2*patternLen)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(0, patDev)
	if err := b.CopyToDevice(patDev, pat2); err != nil {
		t.Fatal(err)
	}
	var kept uint64
	for i, x := range bufs {
		if !x.keep {
			continue
		}
		x.off = uint64(i) * 8191 % patternLen
		for pos := uint64(0); pos < x.size; pos += patternLen {
			n := min(patternLen, x.size-pos)
			if err := b.MemcpyAsync(x.p.Add(pos), patDev.Add((x.off+pos)%patternLen), n, x.s); err != nil {
				t.Fatal(err)
			}
		}
		kept += x.size
	}
	if err := b.DeviceSynchronize(0); err != nil {
		t.Fatal(err)
	}
	st := a.Stats(0)
	t.Logf("workload: %d allocations, %s requested, %s reserved; %s kept",
		len(bufs), gpumem.FormatBytes(uint64(st.RequestedBytes[0].Current)), gpumem.FormatBytes(uint64(st.ReservedBytes[0].Current)), gpumem.FormatBytes(kept))

	d2h, h2d := pinnedCopyRates(t, b, ss[0], kept) // the size Sleep will save

	freeBefore, _, _ := b.MemInfo(0)
	if err := a.Sleep(ctx); err != nil {
		t.Fatal(err)
	}
	freeAsleep, _, _ := b.MemInfo(0)
	rep := a.SleepReport(0)
	t.Logf("asleep: released %s, saved %s, discarded %s; device free %s -> %s",
		gpumem.FormatBytes(rep.Released), gpumem.FormatBytes(rep.Saved), gpumem.FormatBytes(rep.Discarded),
		gpumem.FormatBytes(freeBefore), gpumem.FormatBytes(freeAsleep))
	if freeAsleep < freeBefore || freeAsleep-freeBefore < rep.Released*95/100 {
		t.Errorf("device free memory rose by %d bytes, Sleep released %d", int64(freeAsleep)-int64(freeBefore), rep.Released)
	}
	// Another process takes the freed memory, and more, so that the
	// sleeper cannot wake meanwhile.
	want := freeAsleep - rep.Released/2
	held, release, err := hold(want)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the second process holds %s (asked %s)", gpumem.FormatBytes(held), gpumem.FormatBytes(want))
	if held < rep.Released*9/10 {
		t.Errorf("the second process took %d bytes of the %d released", held, rep.Released)
	}
	werr := a.Wake(ctx)
	if werr == nil || !errors.Is(werr, gpumem.ErrOutOfMemory) || !a.Asleep(0) {
		t.Errorf("Wake while the memory is held elsewhere: %v (asleep %v)", werr, a.Asleep(0))
	} else {
		t.Logf("Wake while held elsewhere: %v", werr)
	}
	if err := release(); err != nil {
		t.Fatalf("the second process: %v", err)
	}
	if err := a.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	rep = a.SleepReport(0)

	// Every kept byte, compared with the pattern.
	piece := make([]byte, patternLen)
	for i, x := range bufs {
		if !x.keep {
			continue
		}
		for pos := uint64(0); pos < x.size; pos += patternLen {
			n := min(patternLen, x.size-pos)
			if err := b.CopyFromDevice(piece[:n], x.p.Add(pos)); err != nil {
				t.Fatal(err)
			}
			o := (x.off + pos) % patternLen
			if !bytes.Equal(piece[:n], pat2[o:o+n]) {
				j := 0
				for piece[j] == pat2[o+uint64(j)] {
					j++
				}
				t.Fatalf("kept allocation %d at %#x (%d bytes): byte %d differs after Wake", i, uintptr(x.p), x.size, pos+uint64(j))
			}
		}
	}
	for _, x := range bufs {
		if err := a.Deallocate(x.p, x.s); err != nil {
			t.Fatal(err)
		}
	}
	gbps := func(n uint64, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }
	// Kept bytes over the copies' time (the copies move Copied >= Saved bytes).
	save, restore := gbps(rep.Saved, rep.SaveTime), gbps(rep.Saved, rep.RestoreTime)
	line := fmt.Sprintf("SLEEP save_GBps=%.2f pinned_d2h_GBps=%.2f restore_GBps=%.2f pinned_h2d_GBps=%.2f save_ratio=%.3f restore_ratio=%.3f "+
		"slept_GiB=%.2f saved_GiB=%.2f sleep_s=%.3f wake_s=%.3f",
		save, d2h, restore, h2d, save/d2h, restore/h2d,
		float64(rep.Released)/(1<<30), float64(rep.Saved)/(1<<30), rep.SleepTime.Seconds(), rep.WakeTime.Seconds())
	fmt.Println(line)
	t.Log(line)
}

// pinnedCopyRates times one plain copy of n bytes from device memory to
// pinned host memory and back, on s: the reference for the sleep copies.
func pinnedCopyRates(t *testing.T, b gpumem.Backend, s gpumem.Stream, n uint64) (d2h, h2d float64) {
	n = max(n&^(1<<20-1), 1<<20)
	dev, err := b.Malloc(0, n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(0, dev)
	host, err := b.MallocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeHost(host)
	rate := func(dst, src gpumem.Ptr) float64 {
		start := time.Now()
		if err := b.MemcpyAsync(dst, src, n, s); err != nil {
			t.Fatal(err)
		}
		if err := b.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		return float64(n) / time.Since(start).Seconds() / 1e9
	}
	rate(host, dev) // first touch of the pinned pages
	return rate(host, dev), rate(dev, host)
}

// The same run on the simulator, small: the test's own logic, with the
// second process played by plain allocations on the simulated device.
func TestSleepWorkloadSim(t *testing.T) {
	g := simtest.New(t, sim.Config{Devices: []sim.DeviceConfig{{Capacity: 4 << 30}}, NoStacks: true})
	runSleepWorkload(t, g, 512<<20, 1<<20+4099, func(n uint64) (uint64, func() error, error) {
		var ps []gpumem.Ptr
		var held uint64
		for held < n {
			c := min(uint64(1)<<30, n-held)
			p, err := g.Malloc(0, c)
			if err != nil {
				break
			}
			ps = append(ps, p)
			held += c
		}
		return held, func() error {
			for _, p := range ps {
				if err := g.Free(0, p); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
}
