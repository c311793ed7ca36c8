package gpumem

// Optional capabilities: interfaces a Backend may implement beyond Backend
// when it knows vendor behaviour that allocators should follow. Allocators
// ask with a type assertion and fall back to the device attributes when a
// backend (or a wrapper around one) does not implement them.

// ManagedMigration is implemented by backends that know which device
// attribute says whether managed pages migrate on demand. On CUDA it is
// concurrent managed access; on HIP it is pageable memory access (XNACK on),
// since clr derives concurrent managed access from system SVM support.
type ManagedMigration interface {
	// ManagedPagesMigrate reports whether dev migrates managed pages on
	// demand.
	ManagedPagesMigrate(dev int) (bool, error)
}

// VirtualMemoryAdvisor is implemented by backends whose virtual memory API
// works but should not be used by default with the loaded library version
// (HIP before 7.0, where PyTorch turns expandable segments off because of VMM
// failures). Allocators keep VMM-backed features the user asked for
// explicitly, and turn off those that are merely on by default.
type VirtualMemoryAdvisor interface {
	// VirtualMemoryDefault reports whether VMM-backed features should be on
	// by default, and when not, why.
	VirtualMemoryDefault() (ok bool, reason string)
}
