package config_test

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/config"
	"github.com/gpumem/gpumem/sim"
)

func ExampleParse() {
	c, err := config.Parse(" max_split_size_mb:512, roundup_power2_divisions:[256:1,>:4], expandable_segments:True")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.MaxSplitSizeMB, c.ExpandableSegments, c.BackendOrDefault())
	fmt.Println(c.DivisionsFor(300 << 20))
	fmt.Println(c)

	_, err = config.Parse("max_split_size_mb:16")
	fmt.Println(err)
	fmt.Println(errors.Is(err, gpumem.ErrInvalidValue))
	// Output:
	// 512 true caching
	// 4
	// max_split_size_mb:512,roundup_power2_divisions:[256:1,>:4],expandable_segments:True
	// gpumem: allocator configuration: max_split_size_mb:16: too small, must be > 20
	// true
}

// Builder is how an allocator package makes the constructor it registers
// with gpumem.RegisterAllocator: parse the string, make the package's
// options, build. Here the caching allocator's, called directly.
func ExampleBuilder() {
	newFromConf := config.Builder(caching.OptionsFromConf, caching.New)

	b, err := sim.New(sim.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	a, err := newFromConf(b, "max_split_size_mb:64")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	fmt.Printf("%T\n", a)

	// A refused configuration builds nothing.
	bad, err := newFromConf(b, "max_split_size_mb:lots")
	fmt.Println(bad == nil, errors.Is(err, gpumem.ErrInvalidValue))
	// Output:
	// *caching.Allocator
	// true true
}
