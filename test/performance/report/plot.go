package report

// The pictures of docs/performance.md, drawn from a result's samples by gonum/plot as SVG: no
// browser, no network. Text is measured with the Liberation fonts gonum/plot carries and only
// named in the files, not embedded (which would add hundreds of kilobytes to each), with
// metric-compatible fallbacks after it.

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

const (
	// DefaultWindow is the width of a timeline's windows: at 50 claims a second, 500 claims,
	// enough for a p99 that is not just the window's slowest claim.
	DefaultWindow = 10 * time.Second
	// plotDirName is the directory of a report's pictures, next to the report; its links
	// name the pictures relative to the report.
	plotDirName = "performance"
	// maxCDFPoints bounds the points of one drawn distribution: a sustained run has tens of
	// thousands of samples and the file would carry every one of them.
	maxCDFPoints = 500
	// logSpread is the slowest ÷ fastest latency above which a latency axis is logarithmic:
	// beyond it, a linear axis squeezes the bulk of the claims into a few pixels beside the
	// tail.
	logSpread = 20
)

// Files' sizes in points (72 to the inch).
var (
	cdfWidth, cdfHeight           = vg.Points(576), vg.Points(360)
	timelineWidth, timelineHeight = vg.Points(576), vg.Points(560)
)

// Colours of the drawn runs; each appears in a file only in its run's lines and legend
// thumbnails, which the tests count.
var (
	sandgateColor       = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	floorColor          = color.RGBA{R: 0xd6, G: 0x61, B: 0x0e, A: 0xff}
	lightFloorColor     = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	admissionFloorColor = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
)

// PlotDir is where the pictures of the report written to reportPath go.
func PlotDir(reportPath string) string {
	return filepath.Join(filepath.Dir(reportPath), plotDirName)
}

// PlotNames returns the names of the files WritePlots writes for res, in the order the report
// shows them: the latency distribution when res has samples, and for a sustained scenario its
// timeline; for the trace scenario, its picture of demand and pools.
func PlotNames(res *Result) []string {
	if res.Trace != nil {
		return tracePlotNames(res)
	}
	if len(res.Samples) == 0 || res.Scenario == "" {
		return nil
	}
	names := []string{res.Scenario + "-cdf.svg"}
	if sustained(res) {
		names = append(names, res.Scenario+"-timeline.svg")
	}
	return names
}

func sustained(res *Result) bool { return strings.HasPrefix(res.Scenario, "sustained") }

// WritePlots writes the pictures of res (PlotNames) into dir and returns their names.
func WritePlots(dir string, res *Result) ([]string, error) {
	if res.Trace != nil {
		return writeTracePlots(dir, res)
	}
	names := PlotNames(res)
	if len(names) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := WriteCDF(filepath.Join(dir, names[0]), res); err != nil {
		return nil, err
	}
	if sustained(res) {
		if err := WriteTimeline(filepath.Join(dir, names[1]), res, DefaultWindow); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// run is one measured run of a scenario as drawn: sandgate's or one of its floors'.
type run struct {
	name    string
	samples []Sample
	color   color.Color
	dashes  []vg.Length
}

// runs returns res and its floors that have samples, sandgate first.
func runs(res *Result) []run {
	var out []run
	add := func(name string, r *Result, c color.Color, dashes ...vg.Length) {
		if r != nil && len(r.Samples) > 0 {
			out = append(out, run{name: name, samples: r.Samples, color: c, dashes: dashes})
		}
	}
	add("sandgate", res, sandgateColor)
	add("floor", res.Floor, floorColor)
	add("light floor", res.LightFloor, lightFloorColor, vg.Points(6), vg.Points(3))
	add("admission floor", res.AdmissionFloor, admissionFloorColor, vg.Points(2), vg.Points(2))
	return out
}

// WriteCDF draws the latency distribution of res and of each of its floors that has samples,
// one curve each: the fraction of the run's Ready claims that were Ready within x ms.
func WriteCDF(path string, res *Result) error {
	p, err := cdfPlot(res)
	if err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	return writeSVG(path, cdfWidth, cdfHeight, p.Draw)
}

func cdfPlot(res *Result) (*plot.Plot, error) {
	all := runs(res)
	if len(all) == 0 {
		return nil, errNoSamples
	}
	p := newPlot(title(res, "latency distribution"))
	p.X.Label.Text = "claim created → Ready (ms, client view)"
	p.Y.Label.Text = "fraction of claims Ready"
	p.Legend.Top, p.Legend.Left = false, false // a distribution's lower right is empty
	p.Add(plotter.NewGrid())
	var lo, hi float64 = math.Inf(1), 0
	for _, r := range all {
		ms := latencies(r.samples)
		xys := cdfPoints(ms, maxCDFPoints)
		lo, hi = min(lo, xys[0].X), max(hi, xys[len(xys)-1].X)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		if len(ms)+1 <= maxCDFPoints {
			// Every claim is a point: draw the steps it makes. Between the kept ranks of a
			// downsampled curve, a straight line is closer to the claims left out.
			l.StepStyle = plotter.PostStep
		}
		l.LineStyle = lineStyle(r.color, r.dashes)
		p.Add(l)
		s := summarize(ms)
		p.Legend.Add(fmt.Sprintf("%s (p50 %s ms, p99 %s ms)", r.name, shortMs(s.P50), shortMs(s.P99)), l)
	}
	latencyAxis(&p.X, lo, hi)
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

var errNoSamples = errors.New("no samples")

// cdfPoints returns the empirical distribution of ms, to be drawn as steps rising at each
// point: (x, fraction of values ≤ x), starting at (fastest, 0) and ending at (slowest, 1).
// Beyond limit points it keeps evenly spaced ranks, a tenth of them in the slowest
// percent, and always the ranks of the p50 and the p99: the curve crosses 0.5 and 0.99 where
// the tables' nearest-rank percentiles are.
func cdfPoints(ms []float64, limit int) plotter.XYs {
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	n := len(sorted)
	if n == 0 {
		return nil
	}
	ranks := make([]int, 0, min(n, limit))
	if n+1 <= limit {
		for i := range n {
			ranks = append(ranks, i)
		}
	} else {
		budget := limit - 3 // the start point, the p50 and the p99
		tail := max(budget/10, 2)
		p50, p99 := nearestRank(n, 50), nearestRank(n, 99)
		ranks = append(ranks, evenly(budget-tail, 0, n-1)...)
		ranks = append(ranks, evenly(tail, p99, n-1)...)
		ranks = append(ranks, p50, p99)
		slices.Sort(ranks)
		ranks = slices.Compact(ranks)
	}
	xys := make(plotter.XYs, 0, len(ranks)+1)
	xys = append(xys, plotter.XY{X: sorted[0], Y: 0})
	for _, i := range ranks {
		xys = append(xys, plotter.XY{X: sorted[i], Y: float64(i+1) / float64(n)})
	}
	return xys
}

// nearestRank is the index in n sorted values of their nearest-rank p-th percentile, as
// stats.Summarize takes it.
func nearestRank(n int, p float64) int {
	return max(int(math.Ceil(p/100*float64(n))), 1) - 1
}

// evenly returns k indices spread evenly over [lo, hi], both included.
func evenly(k, lo, hi int) []int {
	if k < 2 || hi <= lo {
		return []int{lo, hi}
	}
	out := make([]int, k)
	for j := range k {
		out[j] = lo + int(math.Round(float64(j)*float64(hi-lo)/float64(k-1)))
	}
	return out
}

// bucket is what the claims created in one window of a run measured.
type bucket struct {
	// start is the window's start in seconds after the run's first create call.
	start     float64
	claims    int
	p50, p99  float64
	warmShare float64
}

// buckets groups samples by their create time into windows of width, in time order; windows
// without claims are left out.
func buckets(samples []Sample, width time.Duration) []bucket {
	w := width.Seconds()
	byWindow := map[int][]Sample{}
	for _, s := range samples {
		i := int(math.Floor(s.AtSeconds / w))
		byWindow[i] = append(byWindow[i], s)
	}
	var out []bucket
	for _, i := range slices.Sorted(maps.Keys(byWindow)) {
		in := byWindow[i]
		warm := 0
		for _, s := range in {
			if s.Warm {
				warm++
			}
		}
		sum := summarize(latencies(in))
		out = append(out, bucket{start: float64(i) * w, claims: len(in), p50: sum.P50, p99: sum.P99,
			warmShare: float64(warm) / float64(len(in))})
	}
	return out
}

// share is one line of a timeline's lower panel: a fraction of something, 0 to 1, per
// window.
type shareLine struct {
	name   string
	color  color.Color
	dashes []vg.Length
	values []plotter.XY
}

// shares returns the lines of the lower panel of res's timeline: the share of claims served
// by a warm pool member. The pool's own readiness over time (ready members ÷ pool size) is to
// be drawn here too, as a second share, once sustained results carry it.
func shares(res *Result, width time.Duration) []shareLine {
	var warm []plotter.XY
	for _, w := range buckets(res.Samples, width) {
		warm = append(warm, plotter.XY{X: w.start + width.Seconds()/2, Y: w.warmShare})
	}
	return []shareLine{{name: "claims bound to a warm pool member", color: sandgateColor, values: warm}}
}

// WriteTimeline draws a sustained run over time, in windows of width (DefaultWindow when not
// positive) by the claims' create times: the p50 and p99 of sandgate and of its floor in the
// upper panel, the warm share (see shares) in the lower one.
func WriteTimeline(path string, res *Result, width time.Duration) error {
	drawOn, err := timeline(res, width)
	if err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	return writeSVG(path, timelineWidth, timelineHeight, drawOn)
}

// timeline returns what draws the timeline of res (see WriteTimeline) on a canvas.
func timeline(res *Result, width time.Duration) (func(draw.Canvas), error) {
	if width <= 0 {
		width = DefaultWindow
	}
	if len(res.Samples) == 0 {
		return nil, errNoSamples
	}
	mid := width.Seconds() / 2
	xLabel := fmt.Sprintf("claim created (s after the first; one point per %s window)", width)

	lat := newPlot(title(res, "latency and warm share over time"))
	lat.Y.Label.Text = "claim created → Ready (ms)"
	lat.Legend.Top, lat.Legend.Left = true, true
	lat.Add(plotter.NewGrid())
	var lo, hi, end float64 = math.Inf(1), 0, 0
	for _, r := range runs(res) {
		if r.name != "sandgate" && r.name != "floor" {
			continue // the other floors are bounds of a claim's cost, not of its course
		}
		var p50, p99 plotter.XYs
		for _, w := range buckets(r.samples, width) {
			p50 = append(p50, plotter.XY{X: w.start + mid, Y: w.p50})
			p99 = append(p99, plotter.XY{X: w.start + mid, Y: w.p99})
			lo, hi, end = min(lo, w.p50), max(hi, w.p99), max(end, w.start+width.Seconds())
		}
		for _, q := range []struct {
			name   string
			xys    plotter.XYs
			dashes []vg.Length
		}{{"p50", p50, nil}, {"p99", p99, []vg.Length{vg.Points(6), vg.Points(3)}}} {
			l, err := plotter.NewLine(q.xys)
			if err != nil {
				return nil, err
			}
			l.LineStyle = lineStyle(r.color, q.dashes)
			lat.Add(l)
			lat.Legend.Add(r.name+" "+q.name, l)
		}
	}
	latencyAxis(&lat.Y, lo, hi)
	headroom(&lat.Y, 0.55)

	sh := newPlot("")
	sh.Y.Label.Text = "share of the window's claims"
	sh.X.Label.Text = xLabel
	sh.Legend.Top, sh.Legend.Left = true, true
	sh.Add(plotter.NewGrid())
	for _, s := range shares(res, width) {
		l, err := plotter.NewLine(plotter.XYs(s.values))
		if err != nil {
			return nil, err
		}
		l.LineStyle = lineStyle(s.color, s.dashes)
		sh.Add(l)
		sh.Legend.Add(s.name, l)
	}
	sh.Y.Min, sh.Y.Max = 0, 1
	headroom(&sh.Y, 0.8)
	sh.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25}, {Value: 0.5, Label: "0.5"}, {Value: 0.75}, {Value: 1, Label: "1"}}
	for _, p := range []*plot.Plot{lat, sh} {
		p.X.Min, p.X.Max = 0, end
	}
	return func(c draw.Canvas) {
		tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(4), PadBottom: vg.Points(4),
			PadLeft: vg.Points(4), PadRight: vg.Points(8)}
		panels := plot.Align([][]*plot.Plot{{lat}, {sh}}, tiles, c)
		lat.Draw(panels[0][0])
		sh.Draw(panels[1][0])
	}, nil
}

// newPlot returns a plot titled title, its text in a sans-serif face.
func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	for _, s := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		s.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.X.Label.TextStyle.Font.Size = vg.Points(10)
	p.Y.Label.TextStyle.Font.Size = vg.Points(10)
	return p
}

// title is "scenario: description", then what the picture shows, wrapped to fit a picture.
func title(res *Result, what string) string {
	head := res.Scenario
	if res.Description != "" {
		head += ": " + res.Description
	}
	return wrap(head, 80) + "\n" + what
}

// wrap breaks s into lines of at most width bytes where it can, at spaces.
func wrap(s string, width int) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}

func lineStyle(c color.Color, dashes []vg.Length) draw.LineStyle {
	return draw.LineStyle{Color: c, Width: vg.Points(1.5), Dashes: dashes}
}

// latencyAxis sets a latency axis spanning [lo, hi]: logarithmic when the spread is wide
// (logSpread), otherwise linear from 0.
func latencyAxis(a *plot.Axis, lo, hi float64) {
	if logScale(lo, hi) {
		a.Scale = plot.LogScale{}
		a.Tick.Marker = logTicks{}
		a.Min, a.Max = lo, hi
		return
	}
	a.Min, a.Max = 0, hi
}

// headroom raises the top of an axis so that its data take the lower part of it, leaving
// the rest to a legend above the lines.
func headroom(a *plot.Axis, part float64) {
	if _, ok := a.Scale.(plot.LogScale); ok {
		a.Max = a.Min * math.Pow(a.Max/a.Min, 1/part)
		return
	}
	a.Max = a.Min + (a.Max-a.Min)/part
}

func logScale(lo, hi float64) bool { return lo > 0 && hi/lo > logSpread }

// logTicks marks a logarithmic axis at 1, 2 and 5 times the powers of ten, labelled, and at
// the other multiples, unlabelled: gonum's plot.LogTicks labels powers of ten only, which
// leaves a range like 8–400 ms with one label.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Pow10(int(math.Floor(math.Log10(lo)))); decade <= hi; decade *= 10 {
		for m := 1; m < 10; m++ {
			v := float64(m) * decade
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// writeSVG draws onto an SVG canvas of w × h and writes it to path.
func writeSVG(path string, w, h vg.Length, drawOn func(draw.Canvas)) error {
	c := vgsvg.New(w, h)
	drawOn(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	// The face is named, not embedded: fall back to metric-compatible ones, then any sans.
	out := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func latencies(samples []Sample) []float64 {
	ms := make([]float64, len(samples))
	for i, s := range samples {
		ms[i] = s.Ms
	}
	return ms
}

// summarize takes the percentiles of ms as the tables do.
func summarize(ms []float64) stats.Summary {
	ds := make([]time.Duration, len(ms))
	for i, v := range ms {
		ds[i] = time.Duration(v * float64(time.Millisecond))
	}
	return stats.Summarize(ds)
}

// shortMs formats a latency with three significant digits, enough for a legend.
func shortMs(v float64) string {
	return strconv.FormatFloat(v, 'f', max(0, 2-int(math.Floor(math.Log10(math.Max(v, 1))))), 64)
}
