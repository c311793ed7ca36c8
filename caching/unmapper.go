// Moving chunks: the unmaps of a move run on a goroutine of their own.
//
// See doc.go for an overview.

package caching

import (
	"fmt"
	"sync"

	"github.com/gpumem/gpumem"
)

// unmapJob is the device's side of unmapping a run of moved chunks, made off
// the allocating goroutine: one unmap of chunks [i, j) of seg (j == i: none),
// then the release of handles that were mapped there or earlier and that
// no mapping reuses. The allocator's bookkeeping was done when the job was
// queued; the chunks stay marked pending (expandable.pend) until it is
// reaped, so that nothing maps at their addresses while the old mappings
// may still be there.
type unmapJob struct {
	seg     *segment
	i, j    uint64
	release []gpumem.MemHandle
	done    chan struct{} // closed by the worker when the job has run

	// Set by the worker before done is closed.
	failed  []uint64 // chunks still mapped: the run's unmap and the chunk's own failed
	relErrs int      // releases that failed
}

// stuck marks a chunk whose unmap failed, after the job and once more on
// reaping: its address is not mapped again until an unmap succeeds.
var stuck = &unmapJob{}

// unmapper runs a device's unmap jobs in order on one goroutine, started
// when a job is queued and none runs, gone when the queue is empty. It
// takes no allocator lock: the allocating goroutine may wait for a job while
// holding the device's.
type unmapper struct {
	mu      sync.Mutex
	queue   []*unmapJob
	running bool
	wg      sync.WaitGroup
}

// push queues j, starting the worker if none runs.
func (u *unmapper) push(b gpumem.Backend, j *unmapJob) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.queue = append(u.queue, j)
	if !u.running {
		u.running = true
		u.wg.Add(1)
		go u.run(b)
	}
}

func (u *unmapper) run(b gpumem.Backend) {
	defer u.wg.Done()
	for {
		u.mu.Lock()
		if len(u.queue) == 0 {
			u.running = false
			u.mu.Unlock()
			return
		}
		j := u.queue[0]
		u.queue[0] = nil
		u.queue = u.queue[1:]
		u.mu.Unlock()
		j.run(b)
		close(j.done)
	}
}

// run unmaps the job's chunks (in one call, else chunk by chunk) and
// releases its handles. seg's address and chunk size never change, so they
// are read without the device's lock.
func (j *unmapJob) run(b gpumem.Backend) {
	if j.j > j.i {
		e := j.seg.exp
		if j.j-j.i == 1 || b.MemUnmap(j.seg.addr.Add(j.i*e.chunk), (j.j-j.i)*e.chunk) != nil {
			for k := j.i; k < j.j; k++ {
				if b.MemUnmap(j.seg.addr.Add(k*e.chunk), e.chunk) != nil {
					j.failed = append(j.failed, k)
				}
			}
		}
	}
	for _, h := range j.release {
		if b.MemRelease(h) != nil {
			j.relErrs++
		}
	}
}

// queueUnmapLocked hands j to the device's worker. d.mu must be held.
func (d *device) queueUnmapLocked(j *unmapJob) {
	d.inflight = append(d.inflight, j)
	d.unmaps.push(d.a.b, j)
}

// reapLocked takes the finished jobs off d.inflight, oldest first, clearing
// their chunks' pending marks; with wait it waits for every job (the worker
// takes no allocator lock, so waiting with d.mu held cannot deadlock).
// d.mu must be held.
func (d *device) reapLocked(wait bool) {
	n := 0
	for _, j := range d.inflight {
		if !wait {
			select {
			case <-j.done:
			default:
				d.dropReaped(n)
				return
			}
		}
		<-j.done
		d.finishJobLocked(j)
		n++
	}
	d.dropReaped(n)
}

func (d *device) dropReaped(n int) {
	if n == 0 {
		return
	}
	m := copy(d.inflight, d.inflight[n:])
	clear(d.inflight[m:])
	d.inflight = d.inflight[:m]
}

// finishJobLocked clears the pending marks of a job that has run. A chunk
// its worker could not unmap is tried once more here, and marked stuck if
// that fails too. d.mu must be held.
func (d *device) finishJobLocked(j *unmapJob) {
	if j.relErrs > 0 {
		d.a.logf("caching: releasing the physical memory of %d moved chunks failed", j.relErrs)
	}
	if j.j == j.i {
		return
	}
	e := j.seg.exp
	for k := j.i; k < j.j; k++ {
		if e.pend[k] == j {
			e.pend[k] = nil
			e.npend--
		}
	}
	for _, k := range j.failed {
		_ = d.retryUnmapLocked(j.seg, k) // logged; the chunk stays stuck
	}
}

// retryUnmapLocked unmaps chunk k of seg, which a move left mapped at its old
// address, or marks it stuck and returns the unmap's error. d.mu must be
// held.
func (d *device) retryUnmapLocked(seg *segment, k uint64) error {
	e := seg.exp
	addr := seg.addr.Add(k * e.chunk)
	err := d.a.b.MemUnmap(addr, e.chunk)
	if err == nil {
		if e.pend[k] == stuck {
			e.pend[k] = nil
			e.npend--
		}
		return nil
	}
	if e.pend[k] != stuck {
		if e.pend[k] == nil {
			e.npend++
		}
		e.pend[k] = stuck
		d.a.logf("caching: unmapping a moved chunk at %#x failed (%v); its address stays out of use", uintptr(addr), err)
	}
	return err
}

// awaitChunksLocked makes chunks [first, last] of seg free to map: it waits
// for the unmap jobs under way (all of them: they run in order) if one of
// the chunks is pending, and tries the stuck ones again. d.mu must be held.
func (d *device) awaitChunksLocked(seg *segment, first, last uint64) error {
	e := seg.exp
	if e.npend == 0 {
		return nil
	}
	for i := first; i <= last; i++ {
		if e.pend[i] != nil && e.pend[i] != stuck {
			d.reapLocked(true)
			break
		}
	}
	for i := first; i <= last; i++ {
		if e.pend[i] != stuck {
			continue
		}
		if err := d.retryUnmapLocked(seg, i); err != nil {
			return fmt.Errorf("caching: the chunk at %#x is still mapped at its old address after a move: %w",
				uintptr(seg.addr.Add(i*e.chunk)), err)
		}
	}
	return nil
}

// drainUnmapsLocked waits for every unmap job and tries the stuck chunks
// again, before the memory is returned or released. d.mu must be held.
func (d *device) drainUnmapsLocked() {
	d.reapLocked(true)
	for seg := range d.segments {
		if e := seg.exp; e != nil && e.npend > 0 {
			for k := range e.pend {
				if e.pend[k] == stuck {
					_ = d.retryUnmapLocked(seg, uint64(k)) // logged; the chunk stays stuck
				}
			}
		}
	}
}

// keptHandle is physical memory a move unmapped for the mapping underway,
// and the job that removes its old mapping (nil: already removed).
type keptHandle struct {
	h   gpumem.MemHandle
	job *unmapJob
}
