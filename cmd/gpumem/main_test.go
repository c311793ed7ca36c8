package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/fakegpu"
)

// runCmd runs the program in-process and checks that no input reached the
// top-level recover.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	if strings.Contains(e.String(), "internal error") || strings.Contains(e.String(), "goroutine ") {
		t.Fatalf("gpumem %v reached the panic handler:\n%s", args, e.String())
	}
	return code, o.String(), e.String()
}

// withFake makes --backend sim (and the auto fallback) open g.
func withFake(t *testing.T, g *fakegpu.GPU) {
	t.Helper()
	old := openSim
	openSim = g.Open
	t.Cleanup(func() { openSim = old })
}

func TestUsage(t *testing.T) {
	if code, _, e := runCmd(t); code != exitUsage || !strings.Contains(e, "usage: gpumem") {
		t.Errorf("no args: %d %q", code, e)
	}
	if code, _, e := runCmd(t, "frobnicate"); code != exitUsage || !strings.Contains(e, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, e)
	}
	if code, o, _ := runCmd(t, "help"); code != exitOK || !strings.Contains(o, "replay") {
		t.Errorf("help: %d %q", code, o)
	}
	for _, args := range [][]string{
		{"info", "--bogus"}, {"info", "extra"}, {"info", "--backend", "nvidia"}, {"info", "--sim-devices", "0"},
		{"symbols", "--backend", "sim"}, {"symbols", "x"}, {"replay", "--backend", "tpu"},
		{"replay", "--sim-capacity", "lots"}, {"replay", "--sim-capacity", "0"}, {"replay", "--sim-devices", "-1"},
		{"replay", "--json=maybe"},
	} {
		if code, _, e := runCmd(t, args...); code != exitUsage || !strings.Contains(e, "--help')") || strings.Count(e, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, e)
		}
	}
	if code, _, _ := runCmd(t, "replay", "--help"); code != exitOK {
		t.Errorf("replay --help: exit %d", code)
	}
}

func TestPanicBecomesError(t *testing.T) {
	old := openSim
	openSim = func(int, uint64) (gpumem.Backend, error) { panic("simulated bug") }
	defer func() { openSim = old }()
	var o, e bytes.Buffer
	code := run([]string{"info", "--backend", "sim"}, &o, &e)
	if code != exitFail || !strings.Contains(e.String(), "internal error: simulated bug") || strings.Contains(e.String(), "goroutine") {
		t.Fatalf("exit %d, stderr %q", code, e.String())
	}
}

func TestInfoJSON(t *testing.T) {
	withFake(t, newFakeGPU(2, 80<<30))
	code, o, _ := runCmd(t, "info", "--backend", "sim", "--sim-devices", "2", "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(o), &rep); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	for _, k := range []string{"backend", "library", "driver_version", "devices", "peer_access", "error"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("no %q in %s", k, o)
		}
	}
	if rep["backend"] != "sim" || rep["error"] != "" || rep["driver_version"] != float64(13000) {
		t.Errorf("report %v", rep)
	}
	if v, ok := rep["short_calls"]; ok {
		t.Errorf("short_calls %v on the simulator, which makes no foreign call", v)
	}
	devs := rep["devices"].([]any)
	if len(devs) != 2 {
		t.Fatalf("devices %v", devs)
	}
	d0 := devs[0].(map[string]any)
	if d0["name"] != "Fake GPU 0" || d0["total_bytes"] != float64(80<<30) || d0["free_bytes"] != float64(80<<30) ||
		d0["compute_capability"] != "9.0" || d0["managed"] != true || d0["vmm"] != false || d0["index"] != float64(0) {
		t.Errorf("device %v", d0)
	}
	peer := rep["peer_access"].([]any)
	if len(peer) != 2 || peer[0].([]any)[1] != true {
		t.Errorf("peer_access %v", peer)
	}
}

// TestInfoShortCalls: on CUDA, info says whether the pool's calls are short
// calls, in the table and in JSON.
func TestInfoShortCalls(t *testing.T) {
	for _, on := range []bool{true, false} {
		rep := infoReport{Backend: "cuda", Library: "libcuda.so.1", ShortCalls: &on}
		var w bytes.Buffer
		printInfo(&w, rep)
		want := "calls    ordinary (short calls held off"
		if on {
			want = "calls    short for the stream-ordered pool"
		}
		if !strings.Contains(w.String(), want) {
			t.Errorf("short calls %v: table lacks %q:\n%s", on, want, w.String())
		}
		j, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(j), fmt.Sprintf(`"short_calls":%v`, on)) {
			t.Errorf("short calls %v: JSON %s", on, j)
		}
	}
}

func TestInfoTable(t *testing.T) {
	withFake(t, newFakeGPU(1, 1<<30))
	code, o, _ := runCmd(t, "info", "--backend", "sim")
	if code != exitOK || !strings.Contains(o, "Fake GPU 0") || !strings.Contains(o, "1.00 GiB") {
		t.Fatalf("exit %d, output %q", code, o)
	}
}

func TestInfoNoDevice(t *testing.T) {
	withFake(t, newFakeGPU(0, 1<<30))
	code, o, e := runCmd(t, "info", "--backend", "sim", "--json")
	if code != exitNoDevice || !strings.Contains(e, "no device") {
		t.Fatalf("exit %d, stderr %q", code, e)
	}
	var rep infoReport
	if err := json.Unmarshal([]byte(o), &rep); err != nil || rep.Error == "" || len(rep.Devices) != 0 {
		t.Fatalf("report %+v (%v)", rep, err)
	}
}

func TestInfoLibraryNotFound(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	code, o, e := runCmd(t, "info", "--backend", "cuda", "--library", missing, "--json")
	if code != exitUsage {
		t.Fatalf("exit %d, stderr %q", code, e)
	}
	var rep infoReport
	if err := json.Unmarshal([]byte(o), &rep); err != nil || !strings.Contains(rep.Error, missing) {
		t.Fatalf("report %+v (%v)", rep, err)
	}
}

func TestSymbolsLibraryNotFound(t *testing.T) {
	for _, be := range []string{"cuda", "hip"} {
		missing := filepath.Join(t.TempDir(), "libnothing.so")
		code, _, e := runCmd(t, "symbols", "--backend", be, "--library", missing, "--json")
		if code != exitUsage || !strings.Contains(e, missing) {
			t.Errorf("%s: exit %d, stderr %q", be, code, e)
		}
	}
}

// With a vendor library provisioned (CI does), symbols resolves its table.
func TestSymbolsVendorLibrary(t *testing.T) {
	ran := false
	for be, env := range map[string]string{"cuda": "GPUMEM_TEST_CUDA_LIBRARY", "hip": "GPUMEM_TEST_HIP_LIBRARY"} {
		lib := os.Getenv(env)
		if lib == "" {
			continue
		}
		ran = true
		code, o, e := runCmd(t, "symbols", "--backend", be, "--library", lib, "--json")
		var rep gpumem.SymbolReport
		if err := json.Unmarshal([]byte(o), &rep); err != nil {
			t.Fatalf("%s: %v: %s %s", be, err, o, e)
		}
		if rep.Backend == "" || len(rep.Rows) == 0 {
			t.Errorf("%s: report %+v", be, rep)
		}
		want := exitOK
		if rep.MissingRequired > 0 {
			want = exitFail
		}
		if code != want {
			t.Errorf("%s: exit %d with %d required missing", be, code, rep.MissingRequired)
		}
		code, o, _ = runCmd(t, "symbols", "--backend", be, "--library", lib)
		if code != want || !strings.Contains(o, "symbols resolved") {
			t.Errorf("%s table: exit %d %q", be, code, o)
		}
	}
	if !ran {
		t.Skip("GPUMEM_TEST_CUDA_LIBRARY / GPUMEM_TEST_HIP_LIBRARY not set (.ci/vendor-libs.sh provides them)")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"1024": 1024, "80GiB": 80 << 30, "80gib": 80 << 30, "140 GiB": 140 << 30, "1.5GiB": 3 << 29,
		"512M": 512 << 20, "2TB": 2e12, "500MB": 5e8, "4k": 4096, "7B": 7,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1", "1e400", "lots", "99999999999TiB", "NaN"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q): no error", in)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := newFlagSet("x", "", &bytes.Buffer{}, &bytes.Buffer{})
	j := fs.Bool("json", false, "")
	c := fs.String("conf", "", "")
	pos, err := parseInterspersed(fs, []string{"a", "--json", "b", "--conf", "k:v", "c", "--", "--d"})
	if err != nil || !*j || *c != "k:v" || strings.Join(pos, " ") != "a b c --d" {
		t.Fatalf("pos %q json %v conf %q err %v", pos, *j, *c, err)
	}
}

// With a vendor library and no device (CI), info exits 3 and says why.
func TestInfoVendorNoDevice(t *testing.T) {
	ran := false
	for be, env := range map[string]string{"cuda": "GPUMEM_TEST_CUDA_LIBRARY", "hip": "GPUMEM_TEST_HIP_LIBRARY"} {
		lib := os.Getenv(env)
		if lib == "" {
			continue
		}
		ran = true
		code, o, e := runCmd(t, "info", "--backend", be, "--library", lib, "--json")
		var rep infoReport
		if err := json.Unmarshal([]byte(o), &rep); err != nil {
			t.Fatalf("%s: %v: %q", be, err, o)
		}
		switch code {
		case exitOK:
			if len(rep.Devices) == 0 || rep.Error != "" {
				t.Errorf("%s: exit 0 but report %+v", be, rep)
			}
		case exitNoDevice:
			if rep.Error == "" || len(rep.Devices) != 0 || e == "" {
				t.Errorf("%s: exit 3 but report %+v, stderr %q", be, rep, e)
			}
		default:
			t.Errorf("%s: exit %d: %s", be, code, e)
		}
	}
	if !ran {
		t.Skip("GPUMEM_TEST_CUDA_LIBRARY / GPUMEM_TEST_HIP_LIBRARY not set (.ci/vendor-libs.sh provides them)")
	}
}

func TestVersionString(t *testing.T) {
	for _, tc := range []struct {
		backend string
		v       int
		want    string
	}{
		{"cuda", 13000, "13.0 (13000)"}, {"sim", 12020, "12.2 (12020)"},
		{"hip", 50221153, "5.2.21153 (50221153)"}, {"hip", 520, "520"}, {"cuda", 0, "unknown"},
	} {
		if got := versionString(tc.backend, tc.v); got != tc.want {
			t.Errorf("versionString(%s, %d) = %q, want %q", tc.backend, tc.v, got, tc.want)
		}
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		v, step float64
		want    string
	}{
		{7.5, 2.5, "7.5"}, {10, 2.5, "10.0"}, {0.75, 0.25, "0.75"}, {5000, 5000, "5000"}, {4, 2, "4"}, {0.2, 0.1, "0.2"},
	} {
		if got := fmtTick(tc.v, tc.step); got != tc.want {
			t.Errorf("fmtTick(%v, %v) = %q, want %q", tc.v, tc.step, got, tc.want)
		}
	}
	for _, max := range []float64{0.3, 1, 7.4, 12.49, 16.8, 140, 68435} {
		step := niceStep(max)
		if n := math.Ceil(max / step); n > maxTicks || n < 2 {
			t.Errorf("niceStep(%v) = %v gives %v ticks", max, step, n)
		}
	}
}

// The backend chosen through GPUMEM_BACKEND is the one info reports, also
// when it fails to open.
func TestInfoBackendFromEnv(t *testing.T) {
	t.Setenv("GPUMEM_BACKEND", "cuda")
	t.Setenv("GPUMEM_CUDA_LIBRARY", filepath.Join(t.TempDir(), "libcuda.so.1"))
	code, o, e := runCmd(t, "info", "--json")
	if code != exitUsage {
		t.Fatalf("exit %d, stderr %q", code, e)
	}
	var rep infoReport
	if err := json.Unmarshal([]byte(o), &rep); err != nil || rep.Backend != "cuda" || rep.Error == "" {
		t.Fatalf("report %+v (%v): want backend cuda and the error", rep, err)
	}
}
