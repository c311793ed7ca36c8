// Package kernels holds the project's own kernel sources, written once in
// the common dialect (see rtc.Header and docs/kernels.md) and compiled at
// run time with NVRTC or hipRTC through package rtc:
//
//	res, err := rtc.Compile(ctx, kernels.Saxpy.Request("sm_90"))
//
// The sources are embedded in the binary.
package kernels

import (
	_ "embed"

	"github.com/gpumem/gpumem/rtc"
)

// Kernel is one source file and the kernels it defines.
type Kernel struct {
	// File is the source's file name, the program's name in compiler logs.
	File string
	// Source is the source text, in the common dialect.
	Source string
	// Names are the kernels' entry names (extern "C": unmangled) for
	// sources without templates.
	Names []string
	// NameExpressions instantiate a templated kernel; the compiled entry
	// names are rtc.Result.Lowered[expression].
	NameExpressions []string
}

// Request is the compile request for k on target ("sm_90", "gfx90a").
func (k Kernel) Request(target string) rtc.Request {
	return rtc.Request{
		Source:          k.Source,
		Name:            k.File,
		Target:          target,
		NameExpressions: append([]string(nil), k.NameExpressions...),
	}
}

var (
	//go:embed saxpy.cu
	saxpySource string
	//go:embed reduce.cu
	reduceSource string
	//go:embed scale.cu
	scaleSource string
)

// ReduceThreads is the block size Reduce is written for.
const ReduceThreads = 256

// The project's kernels.
var (
	// Saxpy is saxpy(float a, const float *x, float *y, size n): y = a*x + y,
	// one element per thread.
	Saxpy = Kernel{File: "saxpy.cu", Source: saxpySource, Names: []string{"saxpy"}}
	// Reduce is reduce_sum(const float *in, float *out, size n): *out += the
	// sum of in, with ReduceThreads threads per block, shared memory and
	// warp shuffles; *out must be zeroed first.
	Reduce = Kernel{File: "reduce.cu", Source: reduceSource, Names: []string{"reduce_sum"}}
	// Scale is template<typename T> scale(T *x, T a, size n): x *= a,
	// instantiated for float and double.
	Scale = Kernel{File: "scale.cu", Source: scaleSource, NameExpressions: []string{"scale<float>", "scale<double>"}}
)

// All lists the project's kernels.
func All() []Kernel { return []Kernel{Saxpy, Reduce, Scale} }
