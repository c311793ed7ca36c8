package config

import "github.com/gpumem/gpumem"

// Builder returns the function that builds an allocator from a
// configuration string, the New of a gpumem.AllocatorInfo: it parses the
// string (Parse), turns it into the allocator's options with options and
// builds the allocator on the backend with build. Each step's error is
// returned as it is, with a nil gpumem.Allocator (never an interface
// holding a nil pointer).
func Builder[O any, A gpumem.Allocator](options func(Conf) (O, error), build func(gpumem.Backend, O) (A, error)) func(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
	return func(b gpumem.Backend, conf string) (gpumem.Allocator, error) {
		c, err := Parse(conf)
		if err != nil {
			return nil, err
		}
		o, err := options(c)
		if err != nil {
			return nil, err
		}
		a, err := build(b, o)
		if err != nil {
			return nil, err
		}
		return a, nil
	}
}
