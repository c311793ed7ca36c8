package trace_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/trace"
)

func ExampleRead() {
	tr, err := trace.Read(strings.NewReader(`a 1 1048576 0
a 2 4096 1
f 1 0
a 3 2097152 0
f 2 0
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	st := tr.Stats()
	fmt.Println(len(tr.Events), "events,", st.Pairs, "allocations,", st.LiveAtEnd, "live at the end")
	fmt.Println("floor:", st.PeakRequested, "bytes; streams", st.Streams)

	_, err = trace.Read(strings.NewReader("a 1 10 0\nf 1 0\nf 1 0\n"))
	fmt.Println(err)
	fmt.Println(errors.Is(err, gpumem.ErrInvalidValue))
	// Output:
	// 5 events, 3 allocations, 1 live at the end
	// floor: 2101248 bytes; streams [0 1]
	// gpumem: trace: line 3: free of ID 1 that was already freed: "f 1 0"
	// true
}
