package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/gpumem/gpumem"
)

// Hooks that the files wiring in the simulator and the vendor symbol tables
// set from init, so that this command builds whatever is linked in.
var (
	// openSim opens a simulated machine of devices devices of capacity bytes each.
	openSim func(devices int, capacity uint64) (gpumem.Backend, error)
	// symbolTables resolve a vendor's symbol table against a library ("" for
	// the default candidates) without initialising it.
	symbolTables = map[string]func(library string) (gpumem.SymbolReport, error){}
)

// defaultSimCapacity is an H200's memory.
const defaultSimCapacity = 140 << 30

// backendName is the backend a command asked for: name, else GPUMEM_BACKEND
// (read as gpumem.Open reads it), else "" for auto.
func backendName(name string) string {
	if name == "" {
		name = strings.ToLower(strings.TrimSpace(os.Getenv("GPUMEM_BACKEND")))
	}
	return name
}

// openBackend opens the named backend ("" means GPUMEM_BACKEND, else auto).
func openBackend(name, library string, simDevices int, simCapacity uint64) (gpumem.Backend, error) {
	name = backendName(name)
	if name == "sim" {
		if library != "" {
			return nil, usagef("--library does not apply to the simulator")
		}
		return openSimulator(simDevices, simCapacity)
	}
	return gpumem.Open(gpumem.Options{Backend: name, Library: library})
}

func openSimulator(devices int, capacity uint64) (gpumem.Backend, error) {
	if openSim == nil {
		return nil, fmt.Errorf("gpumem: the simulator is not linked into this build: %w", gpumem.ErrNotSupported)
	}
	return openSim(devices, capacity)
}

func checkBackendName(name string) error {
	switch name {
	case "", "auto", "cuda", "hip", "sim":
		return nil
	}
	return usagef("unknown backend %q (want cuda, hip, sim or auto)", name)
}
