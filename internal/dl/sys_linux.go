package dl

import "github.com/ebitengine/purego"

// openMode is how every library is opened: resolve all relocations now (so a
// broken library fails at Open rather than at its first call), make its
// symbols visible to libraries it loads later, and never unload it.
//
// RTLD_NODELETE (0x1000 in glibc's and musl's <dlfcn.h>, on amd64 and arm64
// alike) keeps the code in memory after the last dlclose: the vendors'
// runtimes start threads and register exit handlers when first called,
// which must not outlive the code they run (RCCL's HIP runtime, called with
// no device and then unloaded, crashed the process about once in twelve
// runs; never in twelve without the unload). Close still releases the
// handle; a later Open of the same file finds it loaded.
const openMode = purego.RTLD_NOW | purego.RTLD_GLOBAL | rtldNoDelete

const rtldNoDelete = 0x1000

func sysDlopen(name string) (uintptr, error)           { return purego.Dlopen(name, openMode) }
func sysDlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }
func sysDlclose(h uintptr) error                       { return purego.Dlclose(h) }
