package gpumem

// SymbolRow is one operation of a vendor backend's symbol table as resolved
// against a library.
type SymbolRow struct {
	Name     string `json:"name"`     // the project's name for the operation, e.g. "MallocAsync"
	Symbol   string `json:"symbol"`   // the vendor symbol, e.g. "cuMemAllocAsync"
	Resolved bool   `json:"resolved"` // the library exports it
	Required bool   `json:"required"` // the allocators need it; Open fails without it
	Notes    string `json:"notes,omitempty"`
}

// SymbolReport is the result of resolving a backend's symbol table against a
// library without initialising it (so it works on machines with no GPU).
type SymbolReport struct {
	Backend         string      `json:"backend"`
	Library         string      `json:"library"`
	Version         string      `json:"version"` // the library's driver version, "" when it cannot be read
	Rows            []SymbolRow `json:"rows"`
	MissingRequired int         `json:"missing_required"`
}
