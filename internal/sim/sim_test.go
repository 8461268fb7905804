package sim

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	flagSeed  = flag.Int64("seed", -1, "run only this seed, and print its trace with -v")
	flagSeeds = flag.Int("seeds", 200, "how many seeds TestSim runs (1, 2, …); 40 with -short")
	flagSteps = flag.Int("steps", 200, "steps per seed")
	flagSQL   = flag.Int("sqlite-every", 100, "run every n-th seed on store/sqlite (0: none)")
	flagTwice = flag.Int("twice", 6, "how many seeds TestSimReproducible runs twice")
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// seeds returns the seeds to run: -seed's, or 1 … n.
func seeds(n int) []int64 {
	if *flagSeed >= 0 {
		return []int64{*flagSeed}
	}
	if testing.Short() && !flagSet("seeds") {
		n = min(n, 40)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// flagSet reports whether flag name was given.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// kindFor is the store seed runs on.
func kindFor(seed int64) storeKind {
	if n := int64(*flagSQL); n > 0 && seed%n == 0 {
		return onSQLite
	}
	return onMemory
}

// TestSim runs the simulation for every seed and checks the invariants
// after every step (see the package doc). A failure names the seed; -seed
// N reproduces it, and -v prints its trace.
func TestSim(t *testing.T) {
	var (
		mu    sync.Mutex
		total stats
		n     int
	)
	t0 := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds(*flagSeeds) {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				res := simulate(t, seed, *flagSteps, kindFor(seed), *flagSeed >= 0 && testing.Verbose())
				mu.Lock()
				total.add(res.stats)
				n++
				mu.Unlock()
			})
		}
	})
	t.Logf("%d seeds × %d steps in %v: %d commands (%d acknowledged), %d runs, %d events, %d tool calls ran, %d faults, %d crashes, %d restarts",
		n, *flagSteps, time.Since(t0).Round(time.Millisecond), total.commands, total.acked, total.runs, total.events, total.toolRuns,
		total.faults, total.crashes, total.restarts)
}

// TestSimReproducible runs seeds twice and compares their traces and
// logs: a seed must take the same path every time, or -seed N would not
// reproduce a failure.
func TestSimReproducible(t *testing.T) {
	for _, seed := range seeds(*flagTwice) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			a := simulate(t, seed, *flagSteps, kindFor(seed), false)
			b := simulate(t, seed, *flagSteps, kindFor(seed), false)
			if a.hash == b.hash {
				return
			}
			for i := range min(len(a.trace), len(b.trace)) {
				if a.trace[i] != b.trace[i] {
					t.Fatalf("seed %d takes another path the second time, from trace line %d:\nfirst:  %s\nsecond: %s", seed, i, a.trace[i], b.trace[i])
				}
			}
			for k := range min(len(a.logs), len(b.logs)) {
				for i := range min(len(a.logs[k]), len(b.logs[k])) {
					if !bytes.Equal(a.logs[k][i], b.logs[k][i]) {
						t.Fatalf("seed %d: the log of s%d differs the second time, from event %d:\nfirst:  %s\nsecond: %s", seed, k, i+1, a.logs[k][i], b.logs[k][i])
					}
				}
				if len(a.logs[k]) != len(b.logs[k]) {
					t.Fatalf("seed %d: the log of s%d has %d events the first time, %d the second", seed, k, len(a.logs[k]), len(b.logs[k]))
				}
			}
			t.Fatalf("seed %d ends in other logs the second time (traces of %d and %d lines)", seed, len(a.trace), len(b.trace))
		})
	}
}
