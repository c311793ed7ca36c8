// Package all links every gpumem backend into the program so that
// gpumem.Open can choose among them: the CUDA driver ("cuda"), the HIP
// runtime ("hip") and the simulator ("sim", chosen only by name).
//
//	import _ "github.com/gpumem/gpumem/all"
package all

import (
	// Each backend registers itself with gpumem.Register in init.
	_ "github.com/gpumem/gpumem/driver"
	_ "github.com/gpumem/gpumem/hip"
	_ "github.com/gpumem/gpumem/sim"
)
