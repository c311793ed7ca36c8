package prometheus_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/metrics"
	gpuprom "github.com/gpumem/gpumem/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func registry(t *testing.T) *metrics.Registry {
	t.Helper()
	var st gpumem.MemoryStats
	st.AllocatedBytes.Add(gpumem.StatLarge, 3<<20)
	st.Allocation.Add(gpumem.StatSmall, 2)
	var r metrics.Registry
	if err := r.Add("caching", metrics.SourceFunc(func(int) gpumem.MemoryStats { return st }), []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	return &r
}

// The core's own text passes Prometheus's parser (legacy and UTF-8 name
// validation) and its linter.
func TestExpositionParsesAndLints(t *testing.T) {
	var buf bytes.Buffer
	if err := registry(t).WritePrometheus(&buf); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for name := range fams {
		if _, clash := fams[name+"_total"]; clash {
			t.Errorf("%s and %s_total: one name in OpenMetrics", name, name)
		}
	}
	problems, err := promlint.New(bytes.NewReader(buf.Bytes())).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
}

// The collector gives client_golang the same samples.
func TestCollector(t *testing.T) {
	c := gpuprom.NewCollector(registry(t))
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "gpumem_allocated_bytes"); n != 4 {
		t.Errorf("%d allocated_bytes samples, want 4 (2 devices x 2 pools)", n)
	}
	want := `
# HELP gpumem_allocated_peak_bytes Bytes handed out (rounded): peak of the total since the last reset.
# TYPE gpumem_allocated_peak_bytes gauge
gpumem_allocated_peak_bytes{allocator="caching",device="0"} 3.145728e+06
gpumem_allocated_peak_bytes{allocator="caching",device="1"} 3.145728e+06
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gpumem_allocated_peak_bytes"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
}
