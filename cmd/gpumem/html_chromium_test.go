package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium finds a Chromium to run headless, or skips the test (fails it
// when GPUMEM_REQUIRE_CHROMIUM=1, as CI sets).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("GPUMEM_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH, and GPUMEM_REQUIRE_CHROMIUM=1")
	}
	t.Skip("no chromium on PATH: the page is not checked in a browser (install chromium; GPUMEM_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// headless runs Chromium headless on the page with extra flags and returns
// its standard output.
func headless(t *testing.T, bin, page string, flags ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return stdout.Bytes()
}

// The page of `gpumem replay --html` drawn by a browser: its script runs and
// finds the three curves of each chart, the labels are there, and the
// screenshot of the chart is not blank.
func TestReplayHTMLInChromium(t *testing.T) {
	bin := chromium(t)
	withFake(t, newFakeGPU(1, 1<<40))
	p := writeTrace(t, "page.trace", tinyTrace)
	dir := t.TempDir()
	page := filepath.Join(dir, "timeline.html")
	if code, _, e := runCmd(t, "replay", "--backend", "sim", "--allocator", "test-pass", "--html", page, p); code != exitOK {
		t.Fatalf("exit %d: %s", code, e)
	}

	dom := string(headless(t, bin, page, "--dump-dom"))
	m := regexp.MustCompile(`<svg[^>]*data-drawn="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's script did not mark the chart drawn:\n%s", dom)
	}
	if n, _ := strconv.Atoi(m[1]); n != 3 {
		t.Errorf("data-drawn=%d, want the 3 curves (reserved, allocated, requested)", n)
	}
	for _, want := range []string{"page through test-pass on sim", "reserved from the device", "allocated (handed out",
		"requested by the trace", "event index", "memory (", "peak reserved", "floor", "Hover over the chart"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}

	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, page, "--window-size=1100,900", "--hide-scrollbars", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// Count the pixels of the curves' colours anywhere in the image: the
	// table has none of them, so they come from the chart.
	colours := map[string][3]uint32{"reserved": {0xd9, 0x48, 0x0f}, "allocated": {0x1c, 0x7e, 0xd6}, "requested": {0x2b, 0x8a, 0x3e}}
	seen := map[string]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			for name, c := range colours {
				if near(r>>8, c[0]) && near(g>>8, c[1]) && near(b>>8, c[2]) {
					seen[name]++
				}
			}
		}
	}
	for name := range colours {
		if seen[name] < 50 {
			t.Errorf("screenshot %s: %d pixels of the %s curve's colour", shot, seen[name], name)
		}
	}
}

func near(a, b uint32) bool { return a+12 >= b && b+12 >= a }
