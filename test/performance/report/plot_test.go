package report

import (
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot/plotter"
)

// svgDoc is what a test reads back from a drawn SVG file.
type svgDoc struct {
	texts []string
	// strokes are the stroke colours of the file's paths, "#RRGGBB", one per path.
	strokes []string
}

// readSVG parses path as XML, failing the test when it is not well-formed.
func readSVG(t *testing.T, path string) svgDoc {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer func() { _ = f.Close() }() // read only
	var doc svgDoc
	dec := xml.NewDecoder(f)
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inText = tok.Name.Local == "text"
			if tok.Name.Local == "path" {
				for _, a := range tok.Attr {
					if _, rest, ok := strings.Cut(a.Value, "stroke:"); a.Name.Local == "style" && ok {
						doc.strokes = append(doc.strokes, rest[:7])
					}
				}
			}
		case xml.CharData:
			if inText {
				doc.texts = append(doc.texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return doc
}

func (d svgDoc) hasText(prefix string) bool {
	return slices.ContainsFunc(d.texts, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// paths counts the paths stroked in c.
func (d svgDoc) paths(c color.RGBA) int {
	hex := fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B)
	n := 0
	for _, s := range d.strokes {
		if s == hex {
			n++
		}
	}
	return n
}

// samples returns n samples a second apart whose latency is base plus i mod spread ms, warm
// when warm(i).
func samples(n int, base, spread float64, warm func(i int) bool) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{AtSeconds: float64(i), Ms: base + math.Mod(float64(i), spread), Warm: warm(i)}
	}
	return out
}

func always(int) bool { return true }

func TestCDFPointsRiseFromZeroToOneThroughTheTablesPercentiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	many := make([]float64, 20000)
	for i := range many {
		many[i] = 5 + r.ExpFloat64()*40
	}
	for name, tc := range map[string]struct {
		ms         []float64
		limit      int
		wantPoints int
	}{
		"few samples keep every point":   {ms: []float64{30, 10, 20, 40}, limit: 500, wantPoints: 5},
		"one sample":                     {ms: []float64{7}, limit: 500, wantPoints: 2},
		"many samples are downsampled":   {ms: many, limit: 500},
		"a tight limit still ends at 1":  {ms: many, limit: 20},
		"exactly at the limit keeps all": {ms: many[:499], limit: 500, wantPoints: 500},
	} {
		t.Run(name, func(t *testing.T) {
			got := cdfPoints(tc.ms, tc.limit)
			if len(got) > tc.limit {
				t.Errorf("%d points, want at most %d", len(got), tc.limit)
			}
			if tc.wantPoints > 0 && len(got) != tc.wantPoints {
				t.Errorf("%d points, want %d", len(got), tc.wantPoints)
			}
			if got[0].Y != 0 || got[len(got)-1].Y != 1 {
				t.Errorf("curve runs from %v to %v, want from y 0 to y 1", got[0], got[len(got)-1])
			}
			for i := 1; i < len(got); i++ {
				if got[i].X < got[i-1].X || got[i].Y <= got[i-1].Y {
					t.Fatalf("not rising at point %d: %v after %v", i, got[i], got[i-1])
				}
			}
			s := summarize(tc.ms)
			for _, q := range []struct{ frac, want float64 }{{0.5, s.P50}, {0.99, s.P99}, {1, s.Max}} {
				i := slices.IndexFunc(got, func(p plotter.XY) bool { return p.Y >= q.frac })
				if math.Abs(got[i].X-q.want) > 0.001 {
					t.Errorf("curve reaches %g at %g ms, want the nearest-rank %g ms", q.frac, got[i].X, q.want)
				}
			}
		})
	}
}

func TestBucketsTakeEachWindowsPercentilesAndWarmShare(t *testing.T) {
	// 30 claims a second apart: the first window all warm at 10–19 ms, the second every other
	// one warm at 100–109 ms, none in the third, the fourth all cold at 50 ms.
	var in []Sample
	for i := range 10 {
		in = append(in, Sample{AtSeconds: float64(i), Ms: 10 + float64(i), Warm: true})
		in = append(in, Sample{AtSeconds: 10 + float64(i), Ms: 100 + float64(i), Warm: i%2 == 0})
		in = append(in, Sample{AtSeconds: 30 + float64(i), Ms: 50})
	}
	got := buckets(in, 10*time.Second)
	want := []bucket{
		{start: 0, claims: 10, p50: 14, p99: 19, warmShare: 1},
		{start: 10, claims: 10, p50: 104, p99: 109, warmShare: 0.5},
		{start: 30, claims: 10, p50: 50, p99: 50, warmShare: 0},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(bucket{})); diff != "" {
		t.Errorf("buckets (-want +got):\n%s", diff)
	}
}

func TestWriteCDFDrawsEachRunWithSamplesAndLeavesOutTheOthers(t *testing.T) {
	res := &Result{
		Scenario: "burst", Description: "300 claims at 300 QPS",
		Samples:    samples(300, 20, 200, always),
		Floor:      &Result{Samples: samples(300, 15, 100, always)},
		LightFloor: &Result{}, // measured, but no claim became Ready
	}
	path := filepath.Join(t.TempDir(), "burst-cdf.svg")
	if err := WriteCDF(path, res); err != nil {
		t.Fatalf("WriteCDF: %v", err)
	}
	doc := readSVG(t, path)
	for _, want := range []string{"burst: 300 claims at 300 QPS", "sandgate (p50 ", "floor (p50 "} {
		if !doc.hasText(want) {
			t.Errorf("no text starting %q in %q", want, doc.texts)
		}
	}
	if doc.hasText("light floor") || doc.hasText("admission floor") {
		t.Errorf("runs without samples are labelled: %q", doc.texts)
	}
	// Each drawn run is a curve and its legend's thumbnail.
	for name, tc := range map[string]struct {
		c    color.RGBA
		want int
	}{
		"sandgate": {sandgateColor, 2}, "floor": {floorColor, 2}, "light floor": {lightFloorColor, 0}, "admission floor": {admissionFloorColor, 0},
	} {
		if got := doc.paths(tc.c); got != tc.want {
			t.Errorf("%s: %d paths, want %d", name, got, tc.want)
		}
	}
}

func TestWriteCDFLabelsTheTablesPercentiles(t *testing.T) {
	// 1..100 ms: nearest-rank p50 50, p99 99; a spread of 100× puts the axis on a log scale.
	res := &Result{Scenario: "serial", Samples: samples(100, 1, 100, always)}
	path := filepath.Join(t.TempDir(), "serial-cdf.svg")
	if err := WriteCDF(path, res); err != nil {
		t.Fatalf("WriteCDF: %v", err)
	}
	doc := readSVG(t, path)
	if !doc.hasText("sandgate (p50 50.0 ms, p99 99.0 ms)") {
		t.Errorf("no legend with the percentiles in %q", doc.texts)
	}
	if !doc.hasText("2") || !doc.hasText("50") {
		t.Errorf("log axis lacks its 2 and 5 multiples in %q", doc.texts)
	}
}

func TestWriteCDFWithoutSamplesFails(t *testing.T) {
	err := WriteCDF(filepath.Join(t.TempDir(), "x.svg"), &Result{Scenario: "x", Floor: &Result{}})
	if !errors.Is(err, errNoSamples) {
		t.Errorf("WriteCDF = %v, want %v", err, errNoSamples)
	}
}

func TestWriteTimelineDrawsPercentilesOfSandgateAndItsFloorAndTheWarmShare(t *testing.T) {
	res := &Result{
		Scenario: "sustained-50",
		Samples:  samples(120, 20, 30, func(i int) bool { return i%4 != 0 }),
		Floor:    &Result{Samples: samples(120, 15, 10, always)},
		// Not drawn over time: the other floors bound a claim's cost, not its course.
		LightFloor: &Result{Samples: samples(120, 2, 3, always)},
	}
	path := filepath.Join(t.TempDir(), "sustained-50-timeline.svg")
	if err := WriteTimeline(path, res, 0); err != nil {
		t.Fatalf("WriteTimeline: %v", err)
	}
	doc := readSVG(t, path)
	for _, want := range []string{"sandgate p50", "sandgate p99", "floor p50", "floor p99", "claims bound to a warm pool member"} {
		if !doc.hasText(want) {
			t.Errorf("no text %q in %q", want, doc.texts)
		}
	}
	// Sandgate: p50, p99 and the warm share, each a line and a thumbnail; the floor: p50, p99.
	for name, tc := range map[string]struct {
		c    color.RGBA
		want int
	}{"sandgate": {sandgateColor, 6}, "floor": {floorColor, 4}, "light floor": {lightFloorColor, 0}} {
		if got := doc.paths(tc.c); got != tc.want {
			t.Errorf("%s: %d paths, want %d", name, got, tc.want)
		}
	}
}

func TestWritePlotsDrawsTimelinesOfSustainedScenariosOnly(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		res  *Result
		want []string
	}{
		"a burst has its distribution": {
			res:  &Result{Scenario: "burst", Samples: samples(10, 5, 5, always)},
			want: []string{"burst-cdf.svg"},
		},
		"a sustained scenario has a timeline too": {
			res:  &Result{Scenario: "sustained-50", Samples: samples(30, 5, 5, always)},
			want: []string{"sustained-50-cdf.svg", "sustained-50-timeline.svg"},
		},
		"a result without samples has none": {res: &Result{Scenario: "scale-20k"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := WritePlots(dir, tc.res)
			if err != nil {
				t.Fatalf("WritePlots: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			for _, name := range got {
				readSVG(t, filepath.Join(dir, name))
			}
		})
	}
}

func TestMarkdownLinksThePicturesThatExist(t *testing.T) {
	reportPath := filepath.Join(t.TempDir(), "performance.md")
	drawn := &Result{Scenario: "sustained-50", Samples: samples(30, 5, 5, always)}
	// Samples, but its pictures were never written.
	notDrawn := &Result{Scenario: "burst", Samples: samples(30, 5, 5, always)}
	if _, err := WritePlots(PlotDir(reportPath), drawn); err != nil {
		t.Fatalf("WritePlots: %v", err)
	}
	var b strings.Builder
	if err := WriteMarkdownWithPlots(&b, Machine{}, []*Result{drawn, notDrawn}, "make bench", reportPath); err != nil {
		t.Fatalf("WriteMarkdownWithPlots: %v", err)
	}
	got := b.String()
	for _, want := range []string{
		"![sustained-50 latency distribution](performance/sustained-50-cdf.svg)",
		"![sustained-50 latency and warm share over time](performance/sustained-50-timeline.svg)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(got, "burst-cdf.svg") {
		t.Errorf("report links a picture that does not exist:\n%s", got)
	}
}
