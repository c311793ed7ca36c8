package gpumem

// SymbolRow is one operation of a vendor backend's symbol table as resolved
// against a library.
type SymbolRow struct {
	Name     string `json:"name"`     // the project's name for the operation, e.g. "MallocAsync"
	Symbol   string `json:"symbol"`   // the vendor symbol, e.g. "cuMemAllocAsync"
	Resolved bool   `json:"resolved"` // the library exports it
	Required bool   `json:"required"` // the allocators need it; Open fails without it
	// Args is the number of argument words the table declares for this
	// vendor's function (0 for a function of no arguments); nil, and
	// absent from the JSON, where the table does not declare it.
	Args  *int   `json:"args,omitempty"`
	Notes string `json:"notes,omitempty"`
}

// SymbolReport is the result of resolving a backend's symbol table against a
// library without initialising it (so it works on machines with no GPU).
//
// For the driver's (CUDA) or runtime's (HIP) table, Layouts and Constants
// describe the ABI the backend speaks for the library's version: every struct
// it lays out by hand and every enum or flag value it passes or interprets,
// under the vendor's own names, so that they can be checked against that
// version's headers.
type SymbolReport struct {
	Backend         string      `json:"backend"`
	Library         string      `json:"library"`
	Version         string      `json:"version"` // the library's driver version, "" when it cannot be read
	Rows            []SymbolRow `json:"rows"`
	MissingRequired int         `json:"missing_required"`
	// Layouts is keyed by the vendor's struct name ("hipMemAllocationProp",
	// "CUmemPoolProps").
	Layouts map[string]StructLayout `json:"layouts,omitempty"`
	// Constants is keyed by the vendor's identifier
	// ("hipDeviceAttributeMemoryPoolsSupported", "CU_MEM_ADVISE_SET_READ_MOSTLY").
	Constants map[string]int64 `json:"constants,omitempty"`
}

// StructLayout is a vendor struct as a backend lays it out by hand: its size
// and the byte offset of each field it writes or reads, under the vendor's
// field names (a nested field as "location.id").
type StructLayout struct {
	Size    int            `json:"size"`
	Offsets map[string]int `json:"offsets"`
}
