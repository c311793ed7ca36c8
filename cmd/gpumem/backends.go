package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/gpumem/gpumem"
)

// openSim opens a simulated machine of devices devices of capacity bytes
// each: a hook that the file wiring in the simulator sets from init, so that
// this command builds whatever is linked in. Every other backend is reached
// through its gpumem.Registration.
var openSim func(devices int, capacity uint64) (gpumem.Backend, error)

// maxSimCapacity is the most memory a simulated device may have, set with
// openSim (0 when the simulator is not linked in: no limit is checked).
var maxSimCapacity uint64

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
	if name == "" || name == "auto" {
		return nil
	}
	if _, ok := gpumem.Lookup(name); ok {
		return nil
	}
	return usagef("unknown backend %q (want %s or auto)", name, strings.Join(backendNames(false), ", "))
}

// backendNames lists the registered backends for messages and usage lines:
// those auto tries, in its order, then the others by name. withSymbols keeps
// only the backends with a symbol table.
func backendNames(withSymbols bool) []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range gpumem.AutoOrder() {
		seen[r.Name] = true
		if !withSymbols || r.Symbols != nil {
			names = append(names, r.Name)
		}
	}
	for _, n := range gpumem.Registered() {
		r, _ := gpumem.Lookup(n)
		if !seen[n] && (!withSymbols || r.Symbols != nil) {
			names = append(names, n)
		}
	}
	return names
}

// libraryEnvs lists the registered backends' library variables, in
// backendNames order.
func libraryEnvs() []string {
	var envs []string
	for _, n := range backendNames(false) {
		if r, _ := gpumem.Lookup(n); r.LibraryEnv != "" {
			envs = append(envs, r.LibraryEnv)
		}
	}
	return envs
}

// checkBackend checks the backend a command asked for: the flag's value, else
// GPUMEM_BACKEND's (a bad value in either is a usage error naming it).
func checkBackend(flagValue string) error {
	if flagValue != "" {
		return checkBackendName(flagValue)
	}
	name := backendName("")
	if err := checkBackendName(name); err != nil {
		return usagef("GPUMEM_BACKEND: %v", err)
	}
	return nil
}
