package deferrable_test

import (
	"os"
	"testing"

	"github.com/gpumem/gpumem/simtest"
)

// TestMain fails the run when a test leaves simulated device objects alive,
// naming where each was created.
func TestMain(m *testing.M) { os.Exit(simtest.Main(m)) }
