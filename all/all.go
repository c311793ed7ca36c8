// Package all links every gpumem backend and allocator into the program so
// that gpumem.Open and gpumem.NewAllocatorFromEnv can choose among them: the
// CUDA driver ("cuda"), the HIP runtime ("hip") and the simulator ("sim",
// chosen only by name); the caching, asyncpool and managed allocators.
//
//	import _ "github.com/gpumem/gpumem/all"
package all

import (
	// Each backend registers itself with gpumem.Register in init, and each
	// allocator with gpumem.RegisterAllocator.
	_ "github.com/gpumem/gpumem/asyncpool"
	_ "github.com/gpumem/gpumem/caching"
	_ "github.com/gpumem/gpumem/driver"
	_ "github.com/gpumem/gpumem/hip"
	_ "github.com/gpumem/gpumem/managed"
	_ "github.com/gpumem/gpumem/sim"
)
