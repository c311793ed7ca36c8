package gpumem

import (
	"strings"
	"testing"
)

func TestOutOfMemorySummary(t *testing.T) {
	e := &OutOfMemoryError{Device: 1}
	if e.Summary() != "" {
		t.Fatal("a summary without statistics")
	}
	var st MemoryStats
	st.ReservedBytes.Add(StatLarge, 3<<20)
	st.NumOOMs = 1
	e.Stats = &st
	s := e.Summary()
	if s != MemorySummary(st, 1) || !strings.Contains(s, "device ID 1") {
		t.Fatalf("summary:\n%s", s)
	}
}
