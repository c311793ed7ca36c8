package symtab

import "strconv"

// Arity is a row's Args column: the number of argument words each
// vendor's function takes. It is per vendor because the two dialects do
// not always agree: hipMemcpy takes a copy kind that cuMemcpy does not,
// cuMemPrefetchAsync_v2 takes flags that hipMemPrefetchAsync does not.
//
// A word is one integer or pointer argument; a struct the C ABI passes by
// value counts as the words it occupies (cuMemAdvise_v2's 8-byte
// CUmemLocation is one). Each element is
//
//   - 0: not declared; calls are not checked (the zero Arity declares
//     nothing, for a variadic function, say);
//   - NoArgs: the function takes no arguments, f(void);
//   - n > 0: the function takes n words.
//
// Build one with Args (every vendor alike) or ArgsPer; those read 0 as a
// function of no arguments, so that Args(0) means f(void). A vendor whose
// Symbol is empty is never checked, whatever its element says.
type Arity [NumVendors]int

// NoArgs is an Arity element declaring a function of no arguments (0
// means "not declared").
const NoArgs = -1

// Args returns the Arity of a function that takes n argument words for
// every vendor; Args(0) declares a function of no arguments.
func Args(n int) Arity {
	var a Arity
	for v := range a {
		a[v] = declare(n)
	}
	return a
}

// ArgsPer returns the Arity of a function that takes cuda words for CUDA
// and hip words for HIP; 0 declares a function of no arguments.
func ArgsPer(cuda, hip int) Arity {
	return Arity{CUDA: declare(cuda), HIP: declare(hip)}
}

func declare(n int) int {
	if n == 0 {
		return NoArgs
	}
	return n
}

// Words returns how many argument words vendor v's function takes, and
// whether the table declares it at all.
func (a Arity) Words(v Vendor) (n int, declared bool) {
	if v < 0 || v >= NumVendors {
		return 0, false
	}
	switch w := a[v]; {
	case w == 0:
		return 0, false
	case w == NoArgs:
		return 0, true
	default:
		return w, true
	}
}

// Ref is Words as the symbols report writes it: a pointer to the count, nil
// where the table does not declare one.
func (a Arity) Ref(v Vendor) *int {
	n, ok := a.Words(v)
	if !ok {
		return nil
	}
	return &n
}

// Valid reports whether every element is 0, NoArgs or a count from 1 to
// max.
func (a Arity) Valid(max int) bool {
	for _, w := range a {
		if w < NoArgs || w > max {
			return false
		}
	}
	return true
}

// String formats a as "3" when the vendors agree, else as "cuda 3, hip 4";
// "none" is a function of no arguments, "?" an undeclared count.
func (a Arity) String() string {
	one := func(v Vendor) string {
		n, ok := a.Words(v)
		switch {
		case !ok:
			return "?"
		case n == 0:
			return "none"
		}
		return strconv.Itoa(n)
	}
	same := true
	for v := Vendor(1); v < NumVendors; v++ {
		same = same && a[v] == a[0]
	}
	if same {
		return one(0)
	}
	s := ""
	for v := Vendor(0); v < NumVendors; v++ {
		if v > 0 {
			s += ", "
		}
		s += v.String() + " " + one(v)
	}
	return s
}
