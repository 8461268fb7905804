package bench

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"time"
)

// plot is a latency distribution chart: the empirical distribution
// function of each series on a logarithmic time axis.
type plot struct {
	name   string // file name without .png
	title  string
	series []series
}

// series is one curve of a plot.
type series struct {
	label string
	d     dist
}

// addPlot records a plot for Report.WritePlots; series without samples
// are left out.
func (r *runner) addPlot(name, title string, ss ...series) {
	p := plot{name: name, title: title}
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
		var buf bytes.Buffer
		if err := png.Encode(&buf, p.draw()); err != nil {
			return out, fmt.Errorf("plot %s: %w", p.name, err)
		}
		name := filepath.Join(dir, p.name+".png")
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			return out, fmt.Errorf("plot %s: %w", p.name, err)
		}
		out = append(out, name)
	}
	return out, nil
}

// Chart geometry, in pixels: the image, and the plot area inside it.
const (
	plotW, plotH   = 900, 520
	areaX0, areaX1 = 64, plotW - 24
	areaY0, areaY1 = 44, plotH - 52
)

// Colour indices of the chart's palette: the fixed colours, then one per
// series (cycling).
const (
	white uint8 = iota
	black
	grey
	silver
	dark
	firstSeries
)

// chartPalette is white, black, two greys for the grid, a dark grey for
// labels, and the series' colours.
func chartPalette() color.Palette {
	const rgb = "\xff\xff\xff\x00\x00\x00\xdd\xdd\xdd\xbb\xbb\xbb\x55\x55\x55" +
		"\x1f\x77\xb4" + // blue
		"\xd6\x27\x28" + // red
		"\x2c\xa0\x2c" + // green
		"\xff\x7f\x0e" + // orange
		"\x94\x67\xbd" + // purple
		"\x8c\x56\x4b" // brown
	var p color.Palette
	for i := 0; i < len(rgb); i += 3 {
		p = append(p, color.RGBA{rgb[i], rgb[i+1], rgb[i+2], 0xff})
	}
	return p
}

// seriesColor is the colour index of the i-th series.
func seriesColor(i int) uint8 { return firstSeries + uint8(i%(len(chartPalette())-int(firstSeries))) }

// draw renders p: x is the latency on a log scale spanning whole decades
// around the samples, y the fraction of samples at or below it.
func (p plot) draw() *image.Paletted {
	img := image.NewPaletted(image.Rect(0, 0, plotW, plotH), chartPalette()) // index 0: white
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
	x := func(d float64) int {
		f := (math.Log10(math.Max(d, 1)) - dlo) / (dhi - dlo)
		return areaX0 + int(math.Round(f*float64(areaX1-areaX0)))
	}
	y := func(f float64) int { return areaY1 - int(math.Round(f*float64(areaY1-areaY0))) }

	// Grid and axes.
	for dec := dlo; dec <= dhi; dec++ {
		for m := 1; m < 10; m++ {
			v := math.Pow(10, dec) * float64(m)
			if v > math.Pow(10, dhi) {
				break
			}
			c := grey
			if m == 1 {
				c = silver
			}
			vline(img, x(v), areaY0, areaY1, c)
			if m == 1 {
				label := decade(time.Duration(v))
				text(img, x(v)-textWidth(label)/2, areaY1+18, label, black)
			}
		}
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		hline(img, areaX0, areaX1, y(f), grey)
		label := fmt.Sprintf("%g%%", f*100)
		text(img, areaX0-8-textWidth(label), y(f)-glyphH/2+glyphAscent-2, label, black)
	}
	hline(img, areaX0, areaX1, areaY1, black)
	vline(img, areaX0, areaY0, areaY1, black)
	text(img, (plotW-textWidth(p.title))/2, 22, p.title, black)
	xl := "latency (log scale)"
	text(img, (areaX0+areaX1-textWidth(xl))/2, plotH-12, xl, dark)
	text(img, 8, areaY0-12, "share of samples at or below", dark)

	// Curves: the distribution function as steps.
	for i, s := range p.series {
		c := seriesColor(i)
		px, py := areaX0, y(0)
		for _, pt := range s.d.cdf() {
			nx, ny := x(float64(pt.d)), y(pt.p)
			line(img, px, py, nx, py, c)
			line(img, nx, py, nx, ny, c)
			px, py = nx, ny
		}
		line(img, px, py, areaX1, py, c)
	}

	// Legend, bottom right, where a distribution function leaves room.
	lines := make([]string, len(p.series))
	w := 0
	for i, s := range p.series {
		lines[i] = fmt.Sprintf("%s: p50 %s, p99 %s (n=%s)", s.label, fmtDur(s.d.quantile(0.5)), fmtDur(s.d.quantile(0.99)), fmtInt(float64(s.d.count())))
		w = max(w, textWidth(lines[i]))
	}
	bx1, by1 := areaX1-8, areaY1-8
	bx0, by0 := bx1-w-36, by1-len(lines)*18-8
	fill(img, image.Rect(bx0, by0, bx1, by1), white)
	rect(img, image.Rect(bx0, by0, bx1, by1), dark)
	for i, l := range lines {
		ly := by0 + 8 + i*18
		c := seriesColor(i)
		fill(img, image.Rect(bx0+8, ly+5, bx0+24, ly+8), c)
		text(img, bx0+30, ly+glyphAscent, l, black)
	}
	return img
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

func fill(img *image.Paletted, r image.Rectangle, c uint8) {
	r = r.Intersect(img.Bounds())
	for yy := r.Min.Y; yy < r.Max.Y; yy++ {
		row := img.Pix[img.PixOffset(r.Min.X, yy):img.PixOffset(r.Max.X, yy)]
		for i := range row {
			row[i] = c
		}
	}
}

func rect(img *image.Paletted, r image.Rectangle, c uint8) {
	hline(img, r.Min.X, r.Max.X, r.Min.Y, c)
	hline(img, r.Min.X, r.Max.X, r.Max.Y, c)
	vline(img, r.Min.X, r.Min.Y, r.Max.Y, c)
	vline(img, r.Max.X, r.Min.Y, r.Max.Y, c)
}

func hline(img *image.Paletted, x0, x1, y int, c uint8) {
	for xx := x0; xx <= x1; xx++ {
		img.SetColorIndex(xx, y, c)
	}
}

func vline(img *image.Paletted, x, y0, y1 int, c uint8) {
	for yy := y0; yy <= y1; yy++ {
		img.SetColorIndex(x, yy, c)
	}
}

// line draws a 2-pixel line from (x0, y0) to (x1, y1) (Bresenham).
func line(img *image.Paletted, x0, y0, x1, y1 int, c uint8) {
	dx, dy := iabs(x1-x0), -iabs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		fill(img, image.Rect(x0, y0-1, x0+2, y0+1), c)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func iabs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// text draws s with its baseline at y; characters outside printable
// ASCII are drawn as '?'.
func text(img *image.Paletted, x, y int, s string, c uint8) {
	top := y - glyphAscent
	for _, r := range s {
		if r == 'µ' {
			r = 'u'
		}
		if r < ' ' || r > '~' {
			r = '?'
		}
		g := glyphs[int(r-' ')*glyphH : int(r-' '+1)*glyphH]
		for row := range glyphH {
			bits := g[row]
			for col := range glyphW {
				if bits&(0x80>>col) != 0 {
					img.SetColorIndex(x+col, top+row, c)
				}
			}
		}
		x += glyphAdvance
	}
}

func textWidth(s string) int {
	n := 0
	for range s {
		n++
	}
	return n * glyphAdvance
}
