package dl

import "github.com/ebitengine/purego"

// openMode is how every library is opened: resolve all relocations now (so a
// broken library fails at Open rather than at its first call) and make its
// symbols visible to libraries it loads later.
const openMode = purego.RTLD_NOW | purego.RTLD_GLOBAL

func sysDlopen(name string) (uintptr, error)           { return purego.Dlopen(name, openMode) }
func sysDlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }
func sysDlclose(h uintptr) error                       { return purego.Dlclose(h) }
