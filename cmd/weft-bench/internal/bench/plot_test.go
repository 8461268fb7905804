package bench

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"slices"
	"testing"
	"time"
)

var plotOut = flag.String("plotout", "", "write TestChartPNG's chart to this file, to look at")

// TestChartPNG draws a chart of two series, one of samples and one a
// histogram, and checks that it is a PNG image of the chart's size.
func TestChartPNG(t *testing.T) {
	var fast samples
	var slow hist
	for i := range 200 {
		fast = append(fast, time.Duration(200+i*7)*time.Microsecond)
		slow.add(time.Duration(3+i%40) * time.Millisecond)
	}
	c := chart{name: "t", title: "Warm turn: start to run.completed (µs, ms)", series: []series{{"weft", fast}, {"codex", &slow}}}
	b, err := c.png()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds(); got.Dx() != plotW || got.Dy() != plotH {
		t.Errorf("image %v, want %d×%d", got, plotW, plotH)
	}
	if *plotOut != "" {
		if err := os.WriteFile(*plotOut, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDecadeTicks checks the latency axis's marks: a label at each power
// of ten, minor marks between, nothing outside the range.
func TestDecadeTicks(t *testing.T) {
	ts := decadeTicks{}.Ticks(1e5, 1e7) // 100 µs to 10 ms
	var labels []string
	for _, tk := range ts {
		if tk.Value < 1e5 || tk.Value > 1e7 {
			t.Errorf("tick %v outside the range", tk.Value)
		}
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"100 µs", "1 ms", "10 ms"}; !slices.Equal(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}
	if len(ts) != 19 {
		t.Errorf("%d ticks, want 19 (9 a decade and the last)", len(ts))
	}
}
