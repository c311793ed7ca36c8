package gpumem_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// summaryStats are statistics exercising every scale of the summary.
func summaryStats() gpumem.MemoryStats {
	var st gpumem.MemoryStats
	st.AllocatedBytes.Add(gpumem.StatLarge, 3<<30)
	st.AllocatedBytes.Add(gpumem.StatSmall, 600<<10)
	st.AllocatedBytes.Add(gpumem.StatLarge, -(1 << 30))
	st.ActiveBytes = st.AllocatedBytes
	st.RequestedBytes.Add(gpumem.StatLarge, 2<<30-12345)
	st.RequestedBytes.Add(gpumem.StatSmall, 1000)
	st.ReservedBytes.Add(gpumem.StatLarge, 4<<30)
	st.ReservedBytes.Add(gpumem.StatSmall, 2<<20)
	st.InactiveSplitBytes.Add(gpumem.StatLarge, 5<<20)
	for i := 0; i < 800_000; i++ {
		st.Allocation.Add(gpumem.StatSmall, 1)
	}
	st.Allocation.Add(gpumem.StatLarge, 12)
	st.Active = st.Allocation
	st.Segment.Add(gpumem.StatLarge, 4)
	st.Segment.Add(gpumem.StatSmall, 1)
	st.InactiveSplit.Add(gpumem.StatLarge, 1)
	st.NumOOMs, st.NumAllocRetries = 2, 17
	return st
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got\n%s\nwant (%s)\n%s", got, path, want)
	}
}

func TestMemorySummaryGolden(t *testing.T) {
	golden(t, "memory_summary.golden", gpumem.MemorySummary(summaryStats(), 3))
	golden(t, "memory_summary_abbreviated.golden", gpumem.MemorySummaryAbbreviated(summaryStats(), 0))
	golden(t, "memory_summary_empty.golden", gpumem.MemorySummary(gpumem.MemoryStats{}, 0))
}

// The summary of an allocator's statistics, as torch.cuda.memory_summary
// prints it (here its first lines).
func ExampleMemorySummary() {
	var st gpumem.MemoryStats
	st.AllocatedBytes.Add(gpumem.StatLarge, 3<<30)
	st.Allocation.Add(gpumem.StatLarge, 1)
	lines := strings.Split(gpumem.MemorySummaryAbbreviated(st, 0), "\n")
	fmt.Println(strings.Join(lines[5:8], "\n"))
	// Output:
	// |        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
	// |---------------------------------------------------------------------------|
	// | Allocated memory      |   3072 MiB |   3072 MiB |   3072 MiB |      0 B   |
}
