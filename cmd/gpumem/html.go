package main

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"strings"
	"time"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/replay"
)

// The page is self-contained: inline CSS, SVG drawn here and a small inline
// script for the hover readout (the chart reads fine without it); no network.
// After it has set up a chart, the script marks the chart's <svg> with
// data-drawn="N", the number of curves it found drawn, so that a headless
// browser can check the page.

const (
	chartW, chartH           = 960, 340
	padL, padR, padT, padB   = 78, 20, 16, 52
	plotW, plotH             = chartW - padL - padR, chartH - padT - padB
	colReserved, colAlloc    = "#d9480f", "#1c7ed6"
	colRequested, colGrid    = "#2b8a3e", "#e9ecef"
	maxTicks                 = 6
	gibF                     = float64(1 << 30)
	replayPageTitle          = "gpumem replay: memory timeline"
	replayPageTitleSeparator = " · "
)

type chartView struct {
	ID       string
	Title    string
	Points   template.JS // [[event, reserved, allocated, requested], ...] for the hover readout
	Result   replay.Result
	ConfText string
	SVG      template.HTML
	Every    int
}

type pageView struct {
	Title     string
	Generated string
	Charts    []chartView
	Results   []replay.Result
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"gib": gpumem.FormatBytes,
	"f3":  func(f float64) string { return fmt.Sprintf("%.3f", f) },
	"f0":  func(f float64) string { return fmt.Sprintf("%.0f", f) },
	"conf": func(s string) string {
		if s == "" {
			return "(defaults)"
		}
		return s
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#212529;max-width:1000px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 6px}
p.note{color:#495057;font-size:13px;margin:4px 0 10px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{padding:4px 10px;border-bottom:1px solid #dee2e6;text-align:right;white-space:nowrap}
th{background:#f8f9fa} td.l,th.l{text-align:left}
.legend span{display:inline-block;margin-right:18px;font-size:13px}
.sw{display:inline-block;width:22px;height:4px;vertical-align:middle;margin-right:6px}
svg text{font-size:12px;fill:#495057}
p.readout{font-size:13px;color:#212529;margin:2px 0 6px;min-height:1.2em;font-variant-numeric:tabular-nums}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="note">Generated {{.Generated}}. Floor: the peak of live requested bytes, which no allocator can go under.
Overhead: peak reserved / floor. ns/pair: host time per allocation and free.</p>
<table>
<tr><th class="l">trace</th><th class="l">allocator</th><th class="l">backend</th><th class="l">conf</th><th>pairs</th><th>floor</th><th>peak reserved</th><th>overhead</th><th>device allocs</th><th>OOMs</th><th>ns/pair</th></tr>
{{range .Results}}<tr><td class="l">{{.Trace}}</td><td class="l">{{.Allocator}}</td><td class="l">{{.Backend}}</td><td class="l">{{conf .Conf}}</td><td>{{.Pairs}}</td><td>{{gib .PeakRequested}}</td><td>{{gib .PeakReserved}}</td><td>{{f3 .Overhead}}</td><td>{{.DeviceAllocs}}</td><td>{{.OOMs}}</td><td>{{f0 .NsPerPair}}</td></tr>
{{end}}</table>
{{range .Charts}}
<h2 id="{{.ID}}">{{.Title}}</h2>
<div class="legend"><span><i class="sw" style="background:` + colReserved + `"></i>reserved from the device</span><span><i class="sw" style="background:` + colAlloc + `"></i>allocated (handed out, rounded)</span><span><i class="sw" style="background:repeating-linear-gradient(90deg,` + colRequested + ` 0 6px,transparent 6px 10px)"></i>requested by the trace (live; dashed)</span></div>
<div class="chart">{{.SVG}}<p class="readout">Hover over the chart to read the values at an event.</p>
<script type="application/json" class="points">{{.Points}}</script></div>
<p class="note">Peak reserved {{gib .Result.PeakReserved}}, floor {{gib .Result.PeakRequested}}, overhead {{f3 .Result.Overhead}}, {{.Result.DeviceAllocs}} device allocations, {{.Result.DeviceFrees}} device frees, {{.Result.DeviceSyncs}} device syncs, {{.Result.OOMs}} OOMs, {{.Result.AllocRetries}} retries, {{f0 .Result.NsPerPair}} ns/pair{{if .Result.Device}}, device {{.Result.Device}}{{end}}.
{{if eq .Result.Backend "sim"}}<b>Simulated device</b>: memory figures follow the allocator's rules exactly, host times are not a GPU's. {{end}}Each point is the highest value within its interval of {{.Every}} events, so the curves reach the exact peaks.</p>
{{end}}
<script>
(function(){
  function fmt(n){var u=["B","KiB","MiB","GiB","TiB"],i=0;while(n>=1024&&i<u.length-1){n/=1024;i++}return (i?n.toFixed(2):n)+" "+u[i]}
  document.querySelectorAll("div.chart").forEach(function(div){
    var svg=div.querySelector("svg"),out=div.querySelector("p.readout"),pts=[];
    try{pts=JSON.parse(div.querySelector("script.points").textContent)}catch(e){}
    svg.setAttribute("data-drawn",String(svg.querySelectorAll("path.curve").length));
    if(!pts.length)return;
    var cur=svg.querySelector("line.cursor"),L=+svg.dataset.left,W=+svg.dataset.width,E=+svg.dataset.events;
    svg.addEventListener("mousemove",function(ev){
      var r=svg.getBoundingClientRect(),x=(ev.clientX-r.left)*svg.viewBox.baseVal.width/r.width;
      var e=(x-L)/W*E,lo=0,hi=pts.length-1;
      while(lo<hi){var m=(lo+hi)>>1;if(pts[m][0]<e)lo=m+1;else hi=m}
      if(lo>0&&e-pts[lo-1][0]<pts[lo][0]-e)lo--;
      var p=pts[lo],cx=L+p[0]/E*W;
      cur.setAttribute("x1",cx);cur.setAttribute("x2",cx);cur.setAttribute("visibility","visible");
      out.textContent="event "+p[0]+": reserved "+fmt(p[1])+", allocated "+fmt(p[2])+", requested "+fmt(p[3]);
    });
    svg.addEventListener("mouseleave",function(){cur.setAttribute("visibility","hidden")});
  });
})();
</script>
</body></html>
`))

func writeHTML(path string, results []replay.Result) error {
	page := pageView{Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Results: results}
	var traces, allocs, backends []string
	for _, r := range results {
		traces = appendUnique(traces, r.Trace)
		allocs = appendUnique(allocs, r.Allocator)
		backends = appendUnique(backends, r.Backend)
		every := 1
		if len(r.Timeline) > 1 {
			every = r.Timeline[1].Event - r.Timeline[0].Event
		}
		var pts strings.Builder
		pts.WriteByte('[')
		for i, p := range r.Timeline {
			if i > 0 {
				pts.WriteByte(',')
			}
			fmt.Fprintf(&pts, "[%d,%d,%d,%d]", p.Event, p.Reserved, p.Allocated, p.Requested)
		}
		pts.WriteByte(']')
		page.Charts = append(page.Charts, chartView{
			ID:     fmt.Sprintf("chart%d", len(page.Charts)+1),
			Title:  fmt.Sprintf("%s through %s on %s, conf %s", r.Trace, r.Allocator, r.Backend, orDefaults(r.Conf)),
			Points: template.JS(pts.String()),
			Result: r, SVG: template.HTML(chartSVG(r)), Every: every,
		})
	}
	page.Title = fmt.Sprintf("%s: %s through %s on %s", replayPageTitle,
		strings.Join(traces, ", "), strings.Join(allocs, ", "), strings.Join(backends, ", "))
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, page); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func orDefaults(s string) string {
	if s == "" {
		return "(defaults)"
	}
	return s
}

func appendUnique(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

// niceStep returns a 1-2-5 step that divides [0, max] into at most maxTicks.
func niceStep(max float64) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / maxTicks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// fmtTick formats a tick value with as many decimals as the step needs
// (2.5 → "2.5", 0.25 → "0.25", 5000 → "5000").
func fmtTick(v, step float64) string {
	dec := 0
	for dec < 6 && math.Abs(step*math.Pow(10, float64(dec))-math.Round(step*math.Pow(10, float64(dec)))) > 1e-9 {
		dec++
	}
	return fmt.Sprintf("%.*f", dec, v)
}

// byteUnit returns the binary unit in which n bytes read best on an axis.
func byteUnit(n uint64) (name string, size float64) {
	switch {
	case n >= 1<<30:
		return "GiB", gibF
	case n >= 1<<20:
		return "MiB", 1 << 20
	case n >= 1<<10:
		return "KiB", 1 << 10
	}
	return "bytes", 1
}

// chartSVG draws reserved, allocated and requested bytes against event index,
// in the unit that suits the trace's peak.
func chartSVG(r replay.Result) string {
	var b strings.Builder
	pts := r.Timeline
	var peak uint64 = r.PeakReserved
	for _, p := range pts {
		peak = max(peak, p.Reserved, p.Allocated, p.Requested)
	}
	unit, unitF := byteUnit(peak)
	ymax := float64(peak) / unitF
	xmax := float64(r.Events * max(len(r.Passes), 1)) // the timeline counts the events of every pass
	if ymax <= 0 {
		ymax = 1
	}
	ystep := niceStep(ymax)
	ytop := math.Ceil(ymax/ystep) * ystep
	if xmax <= 0 {
		xmax = 1
	}
	xstep := niceStep(xmax)
	xtop := xmax // the axis ends at the last event
	px := func(e float64) float64 { return padL + e/xtop*plotW }
	py := func(g float64) float64 { return padT + plotH - g/ytop*plotH }

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="memory timeline: reserved, allocated and requested %s against event index" data-left="%d" data-width="%d" data-events="%g">`,
		chartW, chartH, chartW, chartH, unit, padL, plotW, xtop)
	// Grid and y ticks.
	for v := 0.0; v <= ytop+ystep/2; v += ystep {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`, padL, y, padL+plotW, y, colGrid)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, padL-8, y, fmtTick(v, ystep))
	}
	// x ticks (event index).
	for v := 0.0; v <= xtop+xstep*1e-9; v += xstep {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#868e96"/>`, x, padT+plotH, x, padT+plotH+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, padT+plotH+19, fmtTick(v, xstep))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#868e96"/>`, padL, padT+plotH, padL+plotW, padT+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#868e96"/>`, padL, padT, padL, padT+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">event index (allocations and frees in trace order)</text>`, padL+plotW/2, chartH-8)
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">memory (%s)</text>`, padT+plotH/2, unit)

	// dash, when not "", dashes the curve so that it stays visible where it
	// lies on another.
	line := func(name string, get func(replay.Point) uint64, color string, width float64, dash string, fill bool) {
		if len(pts) == 0 {
			return
		}
		var d strings.Builder
		for i, p := range pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, px(float64(p.Event)), py(float64(get(p))/unitF))
		}
		if fill {
			fmt.Fprintf(&b, `<path d="%sL%.1f %.1fL%.1f %.1fZ" fill="%s" fill-opacity="0.12" stroke="none"/>`,
				d.String(), px(float64(pts[len(pts)-1].Event)), py(0), px(float64(pts[0].Event)), py(0), color)
		}
		dashAttr := ""
		if dash != "" {
			dashAttr = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		fmt.Fprintf(&b, `<path class="curve %s" d="%s" fill="none" stroke="%s" stroke-width="%.1f"%s stroke-linejoin="round"><title>%s</title></path>`, name, d.String(), color, width, dashAttr, name)
	}
	line("reserved", func(p replay.Point) uint64 { return p.Reserved }, colReserved, 2, "", true)
	// Allocated often lies exactly under requested: it is drawn wide and
	// solid, requested narrow and dashed on top, so both show.
	line("allocated", func(p replay.Point) uint64 { return p.Allocated }, colAlloc, 3.5, "", false)
	line("requested", func(p replay.Point) uint64 { return p.Requested }, colRequested, 1.6, "6 4", false)

	// Mark the peak reserved and the floor.
	yPeak := py(float64(r.PeakReserved) / unitF)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="4 4"/>`, padL, yPeak, padL+plotW, yPeak, colReserved)
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" style="fill:%s">peak reserved %s</text>`, padL+plotW-4, yPeak-5, colReserved, gpumem.FormatBytes(r.PeakReserved))
	yFloor := py(float64(r.PeakRequested) / unitF)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="2 4"/>`, padL, yFloor, padL+plotW, yFloor, colRequested)
	ty := yFloor + 14
	if math.Abs(yFloor-yPeak) > 18 {
		ty = yFloor - 5
	}
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="start" style="fill:%s">floor %s</text>`, padL+6, ty, colRequested, gpumem.FormatBytes(r.PeakRequested))
	fmt.Fprintf(&b, `<line class="cursor" x1="0" y1="%d" x2="0" y2="%d" stroke="#212529" stroke-width="1" visibility="hidden"/>`, padT, padT+plotH)
	b.WriteString(`</svg>`)
	return b.String()
}
