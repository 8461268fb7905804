package bench

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// dist is a distribution of durations: raw samples or a histogram.
type dist interface {
	// quantile returns the q-quantile (0 ≤ q ≤ 1); zero when empty.
	quantile(q float64) time.Duration
	// count returns the number of samples.
	count() int64
	// cdf returns the empirical distribution function as points
	// (duration, fraction of samples at or below it), ascending.
	cdf() []cdfPoint
}

// cdfPoint is one step of an empirical distribution function.
type cdfPoint struct {
	d time.Duration
	p float64
}

// samples is a list of durations, measured one by one.
type samples []time.Duration

func (s samples) count() int64 { return int64(len(s)) }

// quantile uses the nearest rank.
func (s samples) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[min(max(i, 0), len(c)-1)]
}

func (s samples) cdf() []cdfPoint {
	c := slices.Clone(s)
	slices.Sort(c)
	out := make([]cdfPoint, len(c))
	for i, d := range c {
		out[i] = cdfPoint{d, float64(i+1) / float64(len(c))}
	}
	return out
}

func (s samples) median() time.Duration { return s.quantile(0.5) }

// Histogram buckets grow by 2 % from 1 µs: bucket i holds durations up to
// histMin × histBase^i, the last one everything above ~100 s.
const (
	histBase    = 1.02
	histMin     = time.Microsecond
	histBuckets = 932
)

// hist is a histogram of durations with logarithmic buckets (2 % wide),
// for distributions with too many samples to keep. Safe for concurrent
// use; the zero value is empty.
type hist struct {
	buckets [histBuckets]atomic.Int64
	n       atomic.Int64
}

func (h *hist) add(d time.Duration) {
	i := 0
	if d > histMin {
		i = int(math.Ceil(math.Log(float64(d)/float64(histMin)) / math.Log(histBase)))
	}
	h.buckets[min(i, histBuckets-1)].Add(1)
	h.n.Add(1)
}

func histEdge(i int) time.Duration {
	return time.Duration(float64(histMin) * math.Pow(histBase, float64(i)))
}

func (h *hist) count() int64 { return h.n.Load() }

// quantile returns the upper edge of the bucket holding the q-quantile:
// at most 2 % above the true value.
func (h *hist) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	want := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen >= want {
			return histEdge(i)
		}
	}
	return histEdge(histBuckets - 1)
}

func (h *hist) cdf() []cdfPoint {
	n := h.n.Load()
	if n == 0 {
		return nil
	}
	var out []cdfPoint
	var seen int64
	for i := range h.buckets {
		if c := h.buckets[i].Load(); c > 0 {
			seen += c
			out = append(out, cdfPoint{histEdge(i), float64(seen) / float64(n)})
		}
	}
	return out
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fmtDur formats d with three significant digits in a unit that suits it.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + " µs"
	case d < time.Second:
		return sig3(ms(d)) + " ms"
	default:
		return sig3(d.Seconds()) + " s"
	}
}

// sig3 formats v with three significant digits (more for large integers).
func sig3(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// fmtInt formats n with thousands separators: 12,345.
func fmtInt(n float64) string {
	s := fmt.Sprintf("%.0f", math.Abs(n))
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if n < 0 {
		return "-" + string(out)
	}
	return string(out)
}

// fmtMB formats a size in bytes as decimal megabytes, as the targets are
// written.
func fmtMB(b float64) string { return sig3(b/1e6) + " MB" }

// ratio formats a/b as "1/N" when a < b, else "N×".
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "?"
	}
	if a < b {
		return "1/" + sig3(b/a)
	}
	return sig3(a/b) + "×"
}

// counts returns the histogram's non-empty buckets by index, for
// another process to merge (addCounts).
func (h *hist) counts() map[int]int64 {
	out := map[int]int64{}
	for i := range h.buckets {
		if c := h.buckets[i].Load(); c > 0 {
			out[i] = c
		}
	}
	return out
}

// addCounts merges what counts returned into h; indexes out of range are
// ignored.
func (h *hist) addCounts(m map[int]int64) {
	for i, c := range m {
		if i >= 0 && i < histBuckets && c > 0 {
			h.buckets[i].Add(c)
			h.n.Add(c)
		}
	}
}
