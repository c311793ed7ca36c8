package main

// The allocators the tool offers register themselves with gpumem's registry
// when their packages are imported.
import (
	_ "github.com/gpumem/gpumem/asyncpool"
	_ "github.com/gpumem/gpumem/caching"
	_ "github.com/gpumem/gpumem/managed"
)
