package main

import (
	"context"
	"testing"
	"testing/synctest"

	tea "charm.land/bubbletea/v2"
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
