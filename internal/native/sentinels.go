package native

// Codes maps status codes to gpumem sentinels: a Dialect's Sentinel is a
// table of these, and the two vendors differ only in the table.
type Codes struct {
	Lo, Hi int    // the codes Lo..Hi; Hi 0 means Lo alone
	Names  string // the header's names of Lo (and of Hi, after a space), for header checks
	Err    error  // the sentinel they match
}

// Sentinels returns a Dialect.Sentinel that looks code up in table (the
// first entry that covers it wins); a code no entry covers has none.
func Sentinels(table []Codes) func(code int) error {
	return func(code int) error {
		for _, c := range table {
			if code == c.Lo || (c.Hi != 0 && code >= c.Lo && code <= c.Hi) {
				return c.Err
			}
		}
		return nil
	}
}
