package journal_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"weak"

	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/journal"
)

// probeGate admits every read and records the cost of each page; before
// each read after the first it checks that the previous page is garbage
// (nothing but the consumer could still hold it, and the consumer did
// not keep it).
type probeGate struct {
	t        *testing.T
	starts   int
	costs    []int
	previous weak.Pointer[byte] // the first byte of the last page's first event's data
	held     bool               // previous is set
	fail     error              // returned by EndRead when set
}

func (g *probeGate) StartRead(ctx context.Context) error {
	g.starts++
	if g.held {
		runtime.GC()
		if g.previous.Value() != nil {
			g.t.Errorf("read %d: the previous page is still reachable while the next read waits", g.starts)
		}
	}
	return nil
}

func (g *probeGate) EndRead(ctx context.Context, cost int) error {
	g.costs = append(g.costs, cost)
	return g.fail
}

// A subscription whose ctx carries a ReplayGate asks it before and after
// every page of its replay (with the page's cost), and not for the live
// tail; a page it yielded is let go before the next read starts, so that
// a read that waits at the gate holds nothing; and an error from the
// gate ends the subscription with it.
func TestReplayGate(t *testing.T) {
	j, _ := newJournal(t, journal.Config{})
	ctx := context.Background()
	big := strings.Repeat("x", 40<<10) // each event its own page
	if _, err := j.Append(ctx, runQueued(t, "run_1")); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e, err := event.New("run_1", event.ModelRetry, event.ModelRetryData{Attempt: i, Error: big})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	last := j.LastSeq()
	g := &probeGate{t: t}
	n := 0
	for evs, err := range j.EncodedEvents(journal.WithReplayGate(ctx, g), 0, journal.SubscribeOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n += len(evs)
		if evs[0].JSON == nil { // a replay page
			g.previous, g.held = weak.Make(&evs[0].Event.Data[0]), true
		}
		if evs[len(evs)-1].Event.Seq == last {
			break
		}
	}
	if n != int(last) {
		t.Fatalf("read %d events of %d", n, last)
	}
	if g.starts != len(g.costs) || g.starts < 5 {
		t.Fatalf("%d StartRead and %d EndRead for a replay of 5 pages or more", g.starts, len(g.costs))
	}
	for i, c := range g.costs[len(g.costs)-5:] {
		if c < len(big) {
			t.Errorf("page %d cost %d; it holds an event of more than %d bytes", i, c, len(big))
		}
	}

	refuse := errors.New("no room")
	g = &probeGate{t: t, fail: refuse}
	for _, err := range j.Events(journal.WithReplayGate(ctx, g), 0, journal.SubscribeOptions{}) {
		if !errors.Is(err, refuse) {
			t.Fatalf("a refused read ended the subscription with %v; want the gate's error", err)
		}
		break
	}
}
