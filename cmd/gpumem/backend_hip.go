package main

import "github.com/gpumem/gpumem/hip"

// The HIP backend: registered with gpumem.Open by its import; its symbol
// table serves the symbols command.
func init() { symbolTables["hip"] = hip.Symbols }
