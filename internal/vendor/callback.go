package vendor

// Host functions and user-object destructors all go through the process's
// single C-callable dispatcher: fn is registered under an id that the runtime
// passes back as userData.

func registerCallback(fn func()) uintptr { return 0 }

func unregisterCallback(id uintptr) {}

func callbackPointer() uintptr { return 0 }
