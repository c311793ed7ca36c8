package main

// The shipped bindings register their tables for `gpumem symbols --table`.
import (
	_ "github.com/gpumem/gpumem/blas"
	_ "github.com/gpumem/gpumem/collective"
	_ "github.com/gpumem/gpumem/telemetry"
)
