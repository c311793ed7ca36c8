// Command inference is what an inference service built on gpumem looks like:
// concurrent requests, each on its own stream, take a KV-cache buffer and
// activations from one caching allocator, copy their input in, run, copy the
// result out and free; the allocator's statistics are printed at the end and
// published through expvar (and at /debug/vars and /metrics with -http).
//
//	go run ./examples/inference -sim
//	go run ./examples/inference -sim -capacity-mib 48 -concurrency 1   # watch out-of-memory handling
//	GPUMEM_ALLOC_CONF=per_process_memory_fraction:0.01 go run ./examples/inference
//
// Backend: gpumem.Open, which honours GPUMEM_BACKEND (cuda, hip, sim, auto).
// It never falls back to the simulator by itself, because a service that
// silently ran on a simulated GPU would be a surprise: when no GPU library or
// device is found the program says why and exits with status 2, telling you
// to pass -sim (or set GPUMEM_BACKEND=sim), which runs on a simulated 140 GiB
// GPU (-capacity-mib sets a smaller one).
//
// Out of memory: an OOM observer logs each failure. A request that fails for
// lack of memory frees what it holds, empties the allocator's cache and tries
// once more with half its batch; if that fails too, the request is shed.
// -fraction (or per_process_memory_fraction in GPUMEM_ALLOC_CONF) caps the
// memory the allocator may reserve, so this is visible on a real GPU too.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem"
	_ "github.com/gpumem/gpumem/all" // the CUDA, HIP and simulator backends
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/metrics"
	"github.com/gpumem/gpumem/sim"
)

const (
	kvPerItem  = 4 << 20   // KV-cache bytes per sequence of the batch
	actPerItem = 256 << 10 // activation bytes per sequence, times 1 to 4
)

// newSim makes the simulated GPU; tests replace it to check for leaks.
var newSim = sim.New

// registry is the process's metrics, published once as the expvar "gpumem".
var (
	registry    metrics.Registry
	publishOnce sync.Once
)

// launcher is the simulator's kernel launch; a real backend runs no kernels
// of its own (gpumem is a memory layer), so there the "work" is a copy.
type launcher interface {
	Launch(s gpumem.Stream, p gpumem.Ptr, size uint64, fn func(mem []byte)) error
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "inference:", err)
		os.Exit(2)
	}
}

// counts are what the requests did.
type counts struct{ served, reduced, shed, ooms atomic.Int64 }

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inference", flag.ContinueOnError)
	fs.SetOutput(stderr)
	useSim := fs.Bool("sim", false, "run on the simulated GPU (also GPUMEM_BACKEND=sim)")
	capMiB := fs.Uint64("capacity-mib", 0, "memory of the simulated GPU in MiB (0: 140 GiB)")
	fraction := fs.Float64("fraction", 0, "cap on reserved memory, a fraction of the device (per_process_memory_fraction)")
	requests := fs.Int("requests", 16, "number of requests")
	concurrency := fs.Int("concurrency", 0, "requests in flight at once (0: all)")
	batch := fs.Int("batch", 8, "sequences per request")
	summary := fs.Bool("summary", false, "print the memory summary (torch.cuda.memory_summary's table) at the end; it is printed after any out-of-memory error anyway")
	addr := fs.String("http", "", "serve /debug/vars and /metrics on this address, and keep serving at the end")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *requests < 1 || *batch < 1 || *concurrency < 0 {
		return errors.New("-requests and -batch must be positive, -concurrency not negative")
	}
	if *concurrency == 0 || *concurrency > *requests {
		*concurrency = *requests
	}
	logger := log.New(stderr, "inference: ", 0)

	// The backend.
	var b gpumem.Backend
	var err error
	if *useSim || os.Getenv("GPUMEM_BACKEND") == "sim" {
		if *capMiB > math.MaxUint64>>20 {
			return fmt.Errorf("-capacity-mib %d: more bytes than 64 bits hold", *capMiB)
		}
		b, err = newSim(sim.Config{Devices: []sim.DeviceConfig{{Capacity: *capMiB << 20}}})
		logger.Print("running on the simulator, not a GPU")
	} else {
		b, err = gpumem.Open(gpumem.Options{})
		if errors.Is(err, gpumem.ErrLibraryNotFound) || errors.Is(err, gpumem.ErrNoDevice) {
			return fmt.Errorf("no GPU: %w\n(pass -sim, or set GPUMEM_BACKEND=sim, to run on the simulator)", err)
		}
	}
	if err != nil {
		return err
	}
	defer b.Close()

	// The allocator, configured from GPUMEM_ALLOC_CONF and the flags.
	conf, err := config.FromEnv()
	if err != nil {
		return err
	}
	opts, err := caching.OptionsFromConf(conf)
	if err != nil {
		return err
	}
	if *fraction != 0 {
		opts.PerProcessMemoryFraction = *fraction
	}
	alloc, err := caching.New(b, opts)
	if err != nil {
		return err
	}
	defer alloc.Close()
	var c counts
	alloc.AddOOMObserver(func(e *gpumem.OutOfMemoryError) {
		c.ooms.Add(1)
		limit := "the device's"
		if e.Limit > 0 {
			limit = gpumem.FormatBytes(e.Limit)
		}
		logger.Printf("out of memory on device %d: asked %s with %s reserved (limit: %s)",
			e.Device, gpumem.FormatBytes(e.Requested), gpumem.FormatBytes(e.Reserved), limit)
	})

	// Metrics: expvar "gpumem" (/debug/vars) and Prometheus text (/metrics).
	if err := registry.Add("caching", alloc, []int{0}); err != nil {
		return err
	}
	defer registry.Remove("caching")
	publishOnce.Do(func() { err = registry.Publish("gpumem") })
	if err != nil {
		return err
	}
	if *addr != "" {
		// Listen first, so that an address that cannot be served fails the
		// run at once instead of leaving it blocked at the end.
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return fmt.Errorf("-http: %w", err)
		}
		http.Handle("/metrics", registry.Handler())
		go func() { logger.Print(http.Serve(ln, nil)) }()
		logger.Printf("serving http://%s/debug/vars and /metrics", ln.Addr())
	}

	// The requests: at most `concurrency` in flight, each on its own stream.
	work, _ := b.(launcher)
	sem := make(chan struct{}, *concurrency)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for i := 0; i < *requests; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := serve(b, alloc, work, i, *batch, &c); err != nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("request %d: %w", i, err) })
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}

	fmt.Fprintf(stdout, "requests: %d served (%d at half batch), %d shed, %d out-of-memory errors\n",
		c.served.Load(), c.reduced.Load(), c.shed.Load(), c.ooms.Load())
	printStats(stdout, alloc.Stats(0))
	if *summary || c.ooms.Load() > 0 {
		// Not from the OOM observer: it may run with the allocator's lock
		// held, and the summary reads the allocator's statistics.
		fmt.Fprint(stdout, gpumem.MemorySummaryOf(alloc, 0))
	}
	if *addr != "" {
		logger.Print("done; still serving metrics (interrupt to stop)")
		select {}
	}
	return nil
}

// serve runs one request; out of memory twice sheds it, any other failure is
// returned.
func serve(b gpumem.Backend, alloc *caching.Allocator, work launcher, id, batch int, c *counts) error {
	s, err := b.StreamCreate(0, gpumem.StreamNonBlocking, 0)
	if err != nil {
		return err
	}
	defer b.StreamDestroy(s)
	err = infer(b, alloc, work, s, id, batch)
	if errors.Is(err, gpumem.ErrOutOfMemory) {
		// Give cached blocks back to the device and try a smaller batch.
		if err := alloc.EmptyCache(); err != nil {
			return err
		}
		if err = infer(b, alloc, work, s, id, max(batch/2, 1)); err == nil {
			c.reduced.Add(1)
		}
	}
	switch {
	case err == nil:
		c.served.Add(1)
	case errors.Is(err, gpumem.ErrOutOfMemory):
		c.shed.Add(1)
	default:
		return err
	}
	return nil
}

// infer allocates the request's buffers on s, copies its input in, runs the
// "model", copies the output back and checks it. Everything it allocated is
// freed whatever happens.
func infer(b gpumem.Backend, alloc *caching.Allocator, work launcher, s gpumem.Stream, id, batch int) (err error) {
	rng := rand.New(rand.NewPCG(uint64(id), 1))
	actSize := uint64(batch) * actPerItem * (1 + rng.Uint64N(4)) // activations vary per request
	kv, err := alloc.Allocate(uint64(batch)*kvPerItem, s)
	if err != nil {
		return err
	}
	defer alloc.Deallocate(kv, s)
	act, err := alloc.Allocate(actSize, s)
	if err != nil {
		return err
	}
	defer alloc.Deallocate(act, s)

	in := make([]byte, actSize)
	for i := range in {
		in[i] = byte(i*7 + id)
	}
	want := bytes.Clone(in)
	if err := b.CopyToDevice(act, in); err != nil { // host to device
		return err
	}
	if err := b.MemcpyAsync(kv, act, actSize, s); err != nil { // append to the KV cache
		return err
	}
	if work != nil { // on the simulator, a kernel that adds one to each byte
		if err := work.Launch(s, kv, actSize, func(mem []byte) {
			for i := range mem {
				mem[i]++
			}
		}); err != nil {
			return err
		}
		for i := range want {
			want[i]++
		}
	}
	if err := b.StreamSynchronize(s); err != nil {
		return err
	}
	out := make([]byte, actSize)
	if err := b.CopyFromDevice(out, kv); err != nil { // device to host
		return err
	}
	if !bytes.Equal(out, want) {
		return errors.New("wrong result")
	}
	return nil
}

// printStats prints the allocator's main figures for one device.
func printStats(w io.Writer, st gpumem.MemoryStats) {
	row := func(name string, s gpumem.Stat) {
		fmt.Fprintf(w, "%-16s %12s %12s\n", name, gpumem.FormatBytes(uint64(s.Current)), gpumem.FormatBytes(uint64(s.Peak)))
	}
	fmt.Fprintf(w, "%-16s %12s %12s\n", "device 0", "current", "peak")
	row("requested", st.RequestedBytes[gpumem.StatAll])
	row("allocated", st.AllocatedBytes[gpumem.StatAll])
	row("reserved", st.ReservedBytes[gpumem.StatAll])
	fmt.Fprintf(w, "device allocations %d, frees %d, retries %d, out of memory %d\n",
		st.NumDeviceAlloc, st.NumDeviceFree, st.NumAllocRetries, st.NumOOMs)
}
