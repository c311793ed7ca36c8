package demotrace

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpumem/gpumem/trace"
)

func TestGenerateIsValidAndDeterministic(t *testing.T) {
	a := Generate(Default)
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	b := Generate(Default)
	if !reflect.DeepEqual(a.Events, b.Events) {
		t.Fatal("the same parameters gave different traces")
	}
	p := Default
	p.Seed++
	if reflect.DeepEqual(Generate(p).Events, a.Events) {
		t.Fatal("the seed does not change the trace")
	}
	st := a.Stats()
	t.Logf("%d events, %d pairs, peak %d bytes, %d live at end, streams %v", len(a.Events), st.Pairs, st.PeakRequested, st.LiveAtEnd, st.Streams)
	if len(st.Streams) != 2 || st.LiveAtEnd == 0 || st.PeakRequested < 1<<30 || st.PeakRequested > 40<<30 {
		t.Fatalf("not a training-like trace: %+v", st)
	}
}

// The bundled file is what the generator makes (unless it has been replaced
// by a recorded trace, which its README then says).
func TestBundledFileMatches(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "demo.trace.gz")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("bundled demo trace missing: %v", err)
	}
	f, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Events, Generate(Default).Events) {
		t.Fatal("testdata/demo.trace.gz differs from the generator's output: run go run ./internal/demotrace/gendemo")
	}
}
