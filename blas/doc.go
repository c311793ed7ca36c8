// Package blas is BLAS on the GPU without cgo: cuBLAS on CUDA, hipBLAS on
// HIP (rocBLAS where hipBLAS is absent), and a reference BLAS in Go on the
// simulator, behind one API.
//
//	h, err := blas.Open(b, 0, blas.WithStream(s), blas.WithWorkspace(alloc, 32<<20))
//	defer h.Close()
//	err = h.Sgemm(blas.NoTrans, blas.Trans, m, n, k, 1, a, lda, bm, ldb, 0, c, ldc)
//
// # Routines
//
// The routines a numerical program reaches for first, in float32 (S) and
// float64 (D): Axpy, Dot, Nrm2, Scal, Gemv, Gemm and strided-batched Gemm,
// and GemmEx for float16 and bfloat16 matrices with float32 accumulation.
// Matrices are column-major, as the libraries' are: element (i, j) of a
// matrix with leading dimension ld is element i + j*ld. Every routine is
// queued on the handle's stream and returns at once, except Dot and Nrm2
// with host scalars, which wait for their result. Memory comes from any
// gpumem allocator or the backend; the routines take gpumem.Ptr.
//
// # Pointer mode
//
// The routines without a suffix take alpha and beta as Go values and
// return Dot's and Nrm2's results; the ...Device routines read alpha and
// beta from device memory and write results there, so that nothing waits
// for the GPU (a result computed on the GPU feeds the next call). The
// handle sets the library's pointer mode to what each call needs, only
// when it changes: the mode cannot disagree with the call.
//
// # Checks
//
// The libraries take int dimensions and trust them: a leading dimension
// smaller than the rows, or an extent that wraps, reads out of bounds or
// faults the device. Every call is checked in Go first: m, n, k >= 0 and
// within int32; ld >= max(1, rows); increments not zero (positive for Nrm2
// and Scal) and within int32; batch counts >= 0, strides of A and B >= 0,
// C's stride at least C's extent (results must not overlap); the span of
// each operand neither overflows nor wraps the address space; pointers
// that the call reads or writes are not null, nor device-mode scalars. A
// failed check is an error matching gpumem.ErrInvalidValue, and nothing is
// called. The size of the memory behind a pointer is not known to Go; on
// the simulator an access past the end of an allocation faults the kernel,
// as it would fault a GPU (the stream's next synchronization reports it).
//
// # Libraries
//
// The libraries are bind.Library declarations (CUBLAS, HIPBLAS, ROCBLAS):
// their file names, an environment variable naming a file
// (GPUMEM_CUBLAS_LIBRARY, GPUMEM_HIPBLAS_LIBRARY, GPUMEM_ROCBLAS_LIBRARY),
// their status conventions and a table of the functions called, with the
// header each signature comes from. Where the libraries spell an enum
// differently (transposes are 0/1/2 in cuBLAS and 111/112/113 in hipBLAS and
// rocBLAS; GemmEx's types changed twice in hipBLAS), the spelling is data:
// a dialect per library and version. The package registers the binding
// "blas" with bind, so `gpumem symbols --table blas` checks a library as
// the driver's table is checked. A library is loaded once per process and
// file. Every call that needs the device is made with the handle's device
// current, in the same transition into C (bind's CheckOn).
//
// # Simulator
//
// On a *sim.GPU the routines are one Go kernel, launched on the handle's
// stream like any kernel: ordered after the work before it, its pointers
// resolved at launch and every access checked by the simulator's memory
// detector. It computes in float64 loops and rounds to the element type,
// so programs that call BLAS are tested with no GPU.
//
// # Concurrency
//
// A Handle is safe for use from many goroutines: a mutex holds its stream,
// its pointer mode and the call together, as the libraries' handles need.
// Goroutines that want their calls to overlap use a handle each.
//
// # Workspaces and streams
//
// The libraries' kernels write their workspace, so a workspace given with
// WithWorkspace is never shared between streams: each stream the handle
// queues calls on gets its own, allocated on it when SetStream first moves
// there (as PyTorch keeps one cuBLAS workspace per handle and stream).
// Kernels still running on the stream the handle left cannot race with
// those queued on the new one, and no ordering between the two streams is
// added. The workspaces of at most WithWorkspaceStreams streams are kept;
// beyond that the least recently used goes back to its allocator, ordered
// on its stream. A program that destroys streams calls ReleaseStream
// first, so that nothing is later ordered on a stream that is gone.
package blas
