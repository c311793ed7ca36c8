package symtab

import "testing"

func TestRTCRowsInOpOrder(t *testing.T) {
	if len(RTC.Rows) != int(NumRTCOps) {
		t.Fatalf("%d rows for %d ops", len(RTC.Rows), NumRTCOps)
	}
	for i, r := range RTC.Rows {
		if int(r.ID) != i || r.Op == "" {
			t.Errorf("RTC.Rows[%d] is %q with ID %d", i, r.Op, r.ID)
		}
		if r.Symbol[CUDA] == "" && r.Symbol[HIP] == "" {
			t.Errorf("RTC.Rows[%d] %s has no symbol", i, r.Op)
		}
	}
}

func TestRTCTargetTable(t *testing.T) {
	last := map[Vendor]int{}
	for _, r := range RTCTargetTable {
		if r.From > r.To || r.From <= last[r.Vendor] {
			t.Errorf("%v row %d-%d out of order", r.Vendor, r.From, r.To)
		}
		last[r.Vendor] = r.To
		seen := map[string]bool{}
		for _, tg := range r.Targets {
			if seen[tg] {
				t.Errorf("%v row %d lists %s twice", r.Vendor, r.From, tg)
			}
			seen[tg] = true
		}
	}
	// The abort this table guards against: ROCm 5.2's hipRTC on gfx942 and gfx1100.
	row, ok := RTCTargetsFor(HIP, RTCVersionNumber(5, 2))
	if !ok {
		t.Fatal("no row for ROCm 5.2")
	}
	for _, tg := range row.Targets {
		if tg == "gfx942" || tg == "gfx1100" {
			t.Errorf("ROCm 5.2 row lists %s", tg)
		}
	}
}
