package churn

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestStartStop: the churn collects garbage while it runs, and stop
// restores GOMAXPROCS however often it is called.
func TestStartStop(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	var before debug.GCStats
	debug.ReadGCStats(&before)
	stop := Start()
	time.Sleep(50 * time.Millisecond)
	stop()
	stop()
	var after debug.GCStats
	debug.ReadGCStats(&after)
	if after.NumGC <= before.NumGC {
		t.Errorf("no collection while churning (%d before, %d after)", before.NumGC, after.NumGC)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after stop, want %d", got, procs)
	}
}
