package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"weft.dev/weft/event"
)

// TestTUICommandsOwned: a host call the UI made but Bubble Tea never ran
// (it drops the commands queued when the program ends) does not hold
// the UI's end, and one that starts after the end does not call the
// host.
func TestTUICommandsOwned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		ui := &tui{ctx: ctx}
		called := false
		never := ui.do(func(context.Context) tea.Msg { return nil })
		late := ui.do(func(context.Context) tea.Msg { called = true; return nil })
		running := ui.do(func(ctx context.Context) tea.Msg { <-ctx.Done(); return nil })
		go running()
		synctest.Wait()

		ended := false
		go func() {
			cancel()
			ui.owned.close()
			ended = true
		}()
		synctest.Wait()
		if !ended {
			t.Fatal("the UI's end waits for a command that never ran")
		}
		if msg := late(); msg != nil || called {
			t.Fatalf("a command started after the end called the host (%v)", msg)
		}
		_ = never
	})
}

// TestWrapLines: text wraps at the width, in columns (wide runes count
// two), an indented line stays indented on the rows it wraps to, and
// escape sequences a model wrote are not drawn.
func TestWrapLines(t *testing.T) {
	cases := []struct {
		in    string
		width int
		want  []string
	}{
		{"one two three", 8, []string{"one two", "three"}},
		{"  /quit  exit the UI now", 14, []string{"  /quit  exit", "  the UI now"}},
		{"a\n\nb", 5, []string{"a", "", "b"}},
		{"日本語のテキスト", 6, []string{"日本語", "のテキ", "スト"}},
		{"red \x1b[31mtext\x1b[0m", 20, []string{"red [31mtext[0m"}},
	}
	for _, c := range cases {
		got := wrapLines(c.in, c.width)
		if !slices.Equal(got, c.want) {
			t.Errorf("wrapLines(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
		for _, l := range got {
			if w := ansi.StringWidth(l); w > c.width {
				t.Errorf("wrapLines(%q, %d): a row of %d columns: %q", c.in, c.width, w, l)
			}
		}
	}
}

// TestTUIOneTick: runs that follow one another keep one tick of the
// elapsed time going, not one more per run.
func TestTUIOneTick(t *testing.T) {
	ui := &tui{steersSeen: map[string]bool{}, runsSeen: map[string]bool{}, answered: map[string]string{}}
	if ui.event(event.Event{Type: event.RunStarted, RunID: "run_1", Seq: 1}) == nil {
		t.Fatal("a run started with no tick")
	}
	ui.event(event.Event{Type: event.RunCompleted, RunID: "run_1", Seq: 2})
	if ui.event(event.Event{Type: event.RunStarted, RunID: "run_2", Seq: 3}) != nil {
		t.Fatal("a second tick while the first is on its way")
	}
	if _, cmd := ui.Update(tickMsg{}); cmd == nil {
		t.Fatal("the tick ended while a run goes")
	}
	ui.event(event.Event{Type: event.RunCompleted, RunID: "run_2", Seq: 4})
	if _, cmd := ui.Update(tickMsg{}); cmd != nil {
		t.Fatal("a tick goes on with no run")
	}
	if ui.event(event.Event{Type: event.RunStarted, RunID: "run_3", Seq: 5}) == nil {
		t.Fatal("a run started after the ticks ended with no tick")
	}
}

// TestTUIStatusCost: the status line shows what the run's steps cost,
// and nothing for a model with no price.
func TestTUIStatusCost(t *testing.T) {
	ui := &tui{steersSeen: map[string]bool{}, runsSeen: map[string]bool{}, answered: map[string]string{}, th: newTheme()}
	ui.event(event.Event{Type: event.RunStarted, RunID: "run_1", Seq: 1})
	for i, u := range []event.TokenUsage{{InputTokens: 1000, OutputTokens: 10, CostUSD: 0.0125}, {InputTokens: 2000, OutputTokens: 20, CostUSD: 0.025}} {
		e, err := event.New("run_1", event.Usage, event.UsageData{Step: i + 1, Usage: u})
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = int64(i + 2)
		ui.event(e)
	}
	if s := ui.statusLine(200); !strings.Contains(s, "$0.0375") {
		t.Fatalf("status line %q: no cost $0.0375", s)
	}
	free := &tui{steersSeen: map[string]bool{}, runsSeen: map[string]bool{}, answered: map[string]string{}, th: newTheme()}
	free.event(event.Event{Type: event.RunStarted, RunID: "run_1", Seq: 1})
	e, _ := event.New("run_1", event.Usage, event.UsageData{Step: 1, Usage: event.TokenUsage{InputTokens: 5}})
	e.Seq = 2
	free.event(e)
	if s := free.statusLine(200); strings.Contains(s, "$") {
		t.Fatalf("status line %q shows a cost without a price", s)
	}
}
