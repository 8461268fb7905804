package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chart is a latency distribution chart: the empirical distribution
// function of each series on a logarithmic time axis.
type chart struct {
	name   string // file name without .png
	title  string
	series []series
}

// series is one curve of a chart.
type series struct {
	label string
	d     dist
}

// addPlot records a chart for Report.WritePlots; series without samples
// are left out.
func (r *runner) addPlot(name, title string, ss ...series) {
	p := chart{name: name, title: title}
	for _, s := range ss {
		if s.d != nil && s.d.count() > 0 {
			p.series = append(p.series, s)
		}
	}
	if len(p.series) > 0 {
		r.report.plots = append(r.report.plots, p)
	}
}

// WritePlots draws each latency distribution the run measured as a PNG
// file in dir (created if missing) and returns the files' paths.
func (r *Report) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	var out []string
	for _, p := range r.plots {
		b, err := p.png()
		if err != nil {
			return out, fmt.Errorf("plot %s: %w", p.name, err)
		}
		name := filepath.Join(dir, p.name+".png")
		if err := os.WriteFile(name, b, 0o644); err != nil {
			return out, fmt.Errorf("plot %s: %w", p.name, err)
		}
		out = append(out, name)
	}
	return out, nil
}

// The charts' size in pixels, and their resolution.
const (
	plotW, plotH = 900, 520
	plotDPI      = 96
)

// seriesColor is the colour of the i-th series: Tableau's first six, in
// order, cycling.
func seriesColor(i int) color.RGBA {
	palette := [...]color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, // blue
		{0xd6, 0x27, 0x28, 0xff}, // red
		{0x2c, 0xa0, 0x2c, 0xff}, // green
		{0xff, 0x7f, 0x0e, 0xff}, // orange
		{0x94, 0x67, 0xbd, 0xff}, // purple
		{0x8c, 0x56, 0x4b, 0xff}, // brown
	}
	return palette[i%len(palette)]
}

// png renders p as a PNG image of plotW × plotH pixels: x is the latency
// on a log scale spanning whole decades around the samples, y the share
// of samples at or below it, each series a step function.
func (p chart) png() ([]byte, error) {
	pl, err := p.plot()
	if err != nil {
		return nil, err
	}
	px := func(n int) vg.Length { return vg.Length(n) * vg.Inch / plotDPI }
	c := vgimg.NewWith(vgimg.UseWH(px(plotW), px(plotH)), vgimg.UseDPI(plotDPI))
	pl.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// plot builds the chart's gonum plot.
func (p chart) plot() (*plot.Plot, error) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.series {
		for _, pt := range s.d.cdf() {
			v := math.Max(float64(pt.d), 1)
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	xmin, xmax := math.Pow(10, dlo), math.Pow(10, dhi)

	pl := plot.New()
	pl.Title.Text = p.title
	pl.Title.Padding = vg.Points(8)
	pl.X.Label.Text = "latency (log scale)"
	pl.X.Scale = plot.LogScale{}
	pl.X.Tick.Marker = decadeTicks{}
	pl.X.Min, pl.X.Max = xmin, xmax
	pl.Y.Label.Text = "share of samples at or below"
	pl.Y.Min, pl.Y.Max = 0, 1
	var yt plot.ConstantTicks
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		yt = append(yt, plot.Tick{Value: f, Label: fmt.Sprintf("%g%%", f*100)})
	}
	pl.Y.Tick.Marker = yt
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{0xcc}
	grid.Horizontal.Color = color.Gray{0xcc}
	pl.Add(grid)

	// Sans serif, which reads better on a screen than the default serif.
	sans := func(size vg.Length) font.Font {
		return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size)
	}
	pl.Title.TextStyle.Font = sans(13)
	for _, a := range []*plot.Axis{&pl.X, &pl.Y} {
		a.Label.TextStyle.Font = sans(11)
		a.Tick.Label.Font = sans(10)
	}
	pl.Legend.TextStyle.Font = sans(10)

	// The legend sits bottom right, where a distribution function leaves
	// room.
	pl.Legend.Top, pl.Legend.Left = false, false
	pl.Legend.XOffs, pl.Legend.YOffs = -vg.Points(24), vg.Points(12)
	for i, s := range p.series {
		cdf := s.d.cdf()
		pts := make(plotter.XYs, 0, len(cdf)+2)
		pts = append(pts, plotter.XY{X: xmin, Y: 0})
		for _, pt := range cdf {
			pts = append(pts, plotter.XY{X: math.Max(float64(pt.d), 1), Y: pt.p})
		}
		pts = append(pts, plotter.XY{X: xmax, Y: cdf[len(cdf)-1].p})
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", s.label, err)
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle.Width = vg.Points(1.5)
		l.LineStyle.Color = seriesColor(i)
		pl.Add(l)
		pl.Legend.Add(fmt.Sprintf("%s: p50 %s, p99 %s (n=%s)", s.label, fmtDur(s.d.quantile(0.5)), fmtDur(s.d.quantile(0.99)), fmtInt(float64(s.d.count()))), l)
	}
	return pl, nil
}

// decadeTicks marks a logarithmic axis of nanoseconds: a labelled tick at
// each power of ten (1 ms, 100 µs, 10 s) and minor ones between.
type decadeTicks struct{}

// Ticks implements plot.Ticker.
func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for dec := math.Floor(math.Log10(lo)); dec <= math.Ceil(math.Log10(hi)); dec++ {
		base := math.Pow(10, dec)
		for m := 1; m < 10; m++ {
			v := base * float64(m)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = decade(time.Duration(v))
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// decade labels a power of ten of nanoseconds: 1 ms, 100 µs, 10 s.
func decade(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "µs"}, {time.Nanosecond, "ns"}} {
		if d >= u.d {
			return fmt.Sprintf("%d %s", d/u.d, u.name)
		}
	}
	return "0"
}
