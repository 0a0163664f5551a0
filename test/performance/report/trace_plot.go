package report

import (
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The trace scenario's picture: the demand on top, then one panel per policy with the pool's
// replicas and its ready unbound members over the same seconds, so that a pool that lags the
// demand, or idles far above it, shows against the demand that drove it.

// Colours of the trace picture's lines.
var (
	demandColor   = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	replicasColor = sandgateColor
	readyColor    = lightFloorColor
)

// tracePanelHeight is the height of one panel of the trace picture.
var tracePanelHeight = vg.Points(170)

// tracePlotNames names the trace picture of r, none when r has no trace.
func tracePlotNames(r *Result) []string {
	if r.Trace == nil || r.Scenario == "" {
		return nil
	}
	return []string{r.Scenario + "-timeline.svg"}
}

// writeTracePlots writes the trace picture of r into dir and returns its name.
func writeTracePlots(dir string, r *Result) ([]string, error) {
	names := tracePlotNames(r)
	if len(names) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := WriteTracePlot(filepath.Join(dir, names[0]), r); err != nil {
		return nil, err
	}
	return names, nil
}

// WriteTracePlot draws the trace of r (see the file's comment) to path.
func WriteTracePlot(path string, r *Result) error {
	drawOn, height, err := tracePlot(r)
	if err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	return writeSVG(path, timelineWidth, height, drawOn)
}

// tracePlot returns what draws the trace of r on a canvas, and the canvas's height.
func tracePlot(r *Result) (func(draw.Canvas), vg.Length, error) {
	t := r.Trace
	if t == nil || len(t.Demand) == 0 {
		return nil, 0, errNoTrace
	}
	end := t.DurationSeconds
	demand := newPlot(title(r, "demand, pool replicas and ready unbound members over time"))
	demand.Y.Label.Text = "claims/s"
	demand.Add(plotter.NewGrid())
	var xys plotter.XYs
	for i, v := range t.Demand {
		// A step per bin: the bin's rate from its start to its end.
		xys = append(xys, plotter.XY{X: float64(i) * t.DemandBinSeconds, Y: v}, plotter.XY{X: float64(i+1) * t.DemandBinSeconds, Y: v})
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, 0, err
	}
	l.LineStyle = lineStyle(demandColor, nil)
	demand.Add(l)
	demand.Legend.Add(fmt.Sprintf("claims created (per %g s)", t.DemandBinSeconds), l)
	demand.Legend.Top, demand.Legend.Left = true, true
	demand.Y.Min = 0
	headroom(&demand.Y, 0.8)
	panels := []*plot.Plot{demand}
	var top float64
	for i := range t.Arms {
		for _, q := range t.Arms[i].Timeline {
			if q.AtSeconds <= end {
				top = max(top, float64(q.Replicas), float64(q.Ready))
			}
		}
	}
	for i := range t.Arms {
		a := &t.Arms[i]
		p := newPlot("")
		p.Y.Label.Text = "members"
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		name := a.Policy
		if a.Result != nil {
			name = fmt.Sprintf("%s: %.1f%% warm, %.0f idle member-seconds", a.Policy, 100*a.WarmShare, a.IdleMemberSeconds)
		} else {
			name += ": failed"
		}
		for _, line := range []struct {
			name   string
			value  func(TracePoint) int32
			c      color.Color
			dashes []vg.Length
		}{
			{"replicas", func(q TracePoint) int32 { return q.Replicas }, replicasColor, []vg.Length{vg.Points(6), vg.Points(3)}},
			{"ready unbound", func(q TracePoint) int32 { return q.Ready }, readyColor, nil},
		} {
			var pts plotter.XYs
			for _, q := range a.Timeline {
				if q.AtSeconds <= end {
					pts = append(pts, plotter.XY{X: q.AtSeconds, Y: float64(line.value(q))})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, 0, err
			}
			l.LineStyle = lineStyle(line.c, line.dashes)
			p.Add(l)
			p.Legend.Add(line.name, l)
		}
		p.Title.Text = name
		p.Y.Min, p.Y.Max = 0, max(top, 1)
		headroom(&p.Y, 0.75)
		panels = append(panels, p)
	}
	last := panels[len(panels)-1]
	last.X.Label.Text = "seconds from the trace's start"
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		p.X.Min, p.X.Max = 0, end
		rows[i] = []*plot.Plot{p}
	}
	return func(c draw.Canvas) {
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4),
			PadLeft: vg.Points(4), PadRight: vg.Points(8)}
		aligned := plot.Align(rows, tiles, c)
		for i, p := range panels {
			p.Draw(aligned[i][0])
		}
	}, tracePanelHeight * vg.Length(len(panels)), nil
}

var errNoTrace = errors.New("no trace")
