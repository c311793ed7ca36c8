package main

import "github.com/gpumem/gpumem/driver"

// The CUDA driver backend: registered with gpumem.Open by its import; its
// symbol table serves the symbols command.
func init() { symbolTables["cuda"] = driver.Symbols }
