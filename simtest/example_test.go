package simtest_test

import (
	"fmt"

	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/simtest"
)

// A simulator made with Tracked is checked by Main once every test has run;
// here the allocation is freed, so the check passes.
func ExampleTracked() {
	g, err := simtest.Tracked(sim.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := g.Malloc(0, 4096)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("live objects:", len(g.Leaks()))
	if err := g.Free(0, p); err != nil {
		fmt.Println(err)
	}
	fmt.Println("live objects after Free:", len(g.Leaks()))
	// Output:
	// live objects: 1
	// live objects after Free: 0
}
