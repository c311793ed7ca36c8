package gpumem

import (
	"fmt"
	"strings"
)

// MemorySummary formats one device's statistics as the table that
// torch.cuda.memory_summary prints: the device, the out-of-memory failures
// and allocation retries, then for allocated, active, requested and reserved
// bytes, non-releasable (inactive split) bytes, and the counts of
// allocations, active blocks, segments and non-releasable blocks, the
// current value, peak, total increments and total decrements, each with its
// "from large pool" and "from small pool" rows. Sizes are in B, KiB, MiB,
// GiB... and counts in units, K or M, scaled by the first row of their
// statistic, as PyTorch does. The oversize rows read 0: gpumem keeps no
// such statistics.
//
// stats may come from any allocator or adaptor (its Stats method). Every
// allocator's out-of-memory error carries the statistics of its failure, so
// an out-of-memory log reads:
//
//	var oom *gpumem.OutOfMemoryError
//	if errors.As(err, &oom) {
//		log.Print(err, "\n", oom.Summary())
//	}
func MemorySummary(stats MemoryStats, dev int) string {
	return memorySummary(stats, dev, false)
}

// MemorySummaryOf is MemorySummary of a's statistics on device dev.
func MemorySummaryOf(a Allocator, dev int) string {
	return MemorySummary(a.Stats(dev), dev)
}

// MemorySummaryAbbreviated is MemorySummary without the per-pool rows, as
// torch.cuda.memory_summary(abbreviated=True).
func MemorySummaryAbbreviated(stats MemoryStats, dev int) string {
	return memorySummary(stats, dev, true)
}

// floorDiv is Python's // on integers.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// summarySize formats bytes scaled by pref, as PyTorch's summary does.
func summarySize(sz, pref int64) string {
	prefixes := []string{"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"}
	p, fp := prefixes[0], float64(pref)
	for _, next := range prefixes[1:] {
		if fp < 768*1024 {
			break
		}
		p = next
		sz = floorDiv(sz, 1024)
		fp /= 1024
	}
	return fmt.Sprintf("%6d %s", sz, p)
}

// summaryCount formats a count scaled by pref, as PyTorch's summary does.
func summaryCount(n, pref int64) string {
	prefixes := []string{" ", "K", "M"}
	p, fp := prefixes[0], float64(pref)
	for _, next := range prefixes[1:] {
		if fp < 750*1000 {
			break
		}
		p = next
		n = floorDiv(n, 1000)
		fp /= 1000
	}
	return fmt.Sprintf("%7d %s ", n, p)
}

func memorySummary(st MemoryStats, dev int, abbreviated bool) string {
	type metric struct {
		name  string
		stat  *StatArray
		bytes bool
	}
	metrics := []metric{
		{"Allocated memory", &st.AllocatedBytes, true},
		{"Active memory", &st.ActiveBytes, true},
		{"Requested memory", &st.RequestedBytes, true},
		{"GPU reserved memory", &st.ReservedBytes, true},
		{"Non-releasable memory", &st.InactiveSplitBytes, true},
		{"Allocations", &st.Allocation, false},
		{"Active allocs", &st.Active, false},
		{"GPU reserved segments", &st.Segment, false},
		{"Non-releasable allocs", &st.InactiveSplit, false},
	}
	rule := func(c byte) string { return strings.Repeat(string(c), 75) }
	lines := []string{
		rule('='),
		fmt.Sprintf(" %16s PyTorch CUDA memory summary, device ID %-17d ", "", dev),
		rule('-'),
		fmt.Sprintf("  %9s CUDA OOMs: %-12d | %6s cudaMalloc retries: %-8d  ", "", st.NumOOMs, "", st.NumAllocRetries),
		rule('='),
		"        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
	}
	row := func(name string, s, pref Stat, format func(int64, int64) string) string {
		return fmt.Sprintf(" %-21s | %s | %s | %s | %s ", name,
			format(s.Current, pref.Current), format(s.Peak, pref.Peak),
			format(s.Allocated, pref.Allocated), format(s.Freed, pref.Freed))
	}
	for _, m := range metrics {
		lines = append(lines, rule('-'))
		format := summaryCount
		if m.bytes {
			format = summarySize
		}
		all := m.stat[StatAll]
		lines = append(lines, row(m.name, all, all, format))
		if !abbreviated {
			lines = append(lines, row("      from large pool", m.stat[StatLarge], all, format))
			lines = append(lines, row("      from small pool", m.stat[StatSmall], all, format))
		}
	}
	for _, name := range []string{"Oversize allocations", "Oversize GPU segments"} {
		lines = append(lines, rule('-'), row(name, Stat{}, Stat{}, summaryCount))
	}
	lines = append(lines, rule('='))
	return "|" + strings.Join(lines, "|\n|") + "|\n"
}
