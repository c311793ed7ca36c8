package vendor

import "github.com/gpumem/gpumem/internal/callback"

// Host functions and user-object destructors all go through the process's
// single C-callable dispatcher (purego callbacks are limited in number and
// never freed): fn is registered under an id that the runtime passes back as
// userData, and runs once, or at every launch of a graph it was captured into.

func registerCallback(fn func()) uintptr { return callback.Register(fn, true) }

// registerPersistentCallback registers fn to run at every call (a host
// function captured into a graph runs at each launch) until unregistered.
func registerPersistentCallback(fn func()) uintptr { return callback.Register(fn, false) }

func unregisterCallback(id uintptr) { callback.Unregister(id) }

func callbackPointer() uintptr { return callback.Pointer() }
