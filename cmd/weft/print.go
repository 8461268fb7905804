package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"weft.dev/weft/event"
)

// printer renders a run's events for people: assistant text on stdout as
// it arrives, tool calls compactly on stderr, with a status line when
// stderr is a terminal.
type printer struct {
	stdout, stderr io.Writer
	json           bool
	tty            bool
	status         bool // a status line is showing
	midLine        bool // stdout does not end in a newline
}

func (p *printer) clearStatus() {
	if p.status {
		fmt.Fprint(p.stderr, "\r\033[2K")
		p.status = false
	}
}

func (p *printer) setStatus(s string) {
	if !p.tty {
		return
	}
	p.clearStatus()
	fmt.Fprint(p.stderr, "\033[2m· "+s+"\033[0m")
	p.status = true
}

func (p *printer) endLine() {
	if p.midLine {
		fmt.Fprintln(p.stdout)
		p.midLine = false
	}
}

// print renders one event.
func (p *printer) print(e event.Event) {
	if p.json {
		b, _ := json.Marshal(e)
		fmt.Fprintf(p.stdout, "%s\n", b)
		return
	}
	switch e.Type {
	case event.StepStarted:
		var d event.StepData
		_ = e.Decode(&d)
		p.setStatus(fmt.Sprintf("step %d: waiting for the model", d.Step))
	case event.MessageDelta:
		var d event.DeltaData
		_ = e.Decode(&d)
		p.clearStatus()
		fmt.Fprint(p.stdout, d.Text)
		p.midLine = !strings.HasSuffix(d.Text, "\n")
	case event.ReasoningDelta:
		p.setStatus("thinking")
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		_ = e.Decode(&d)
		p.clearStatus()
		p.endLine()
		fmt.Fprintf(p.stderr, "→ %s %s\n", d.Name, clip(d.Arguments, 100))
		p.setStatus("running " + d.Name)
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		_ = e.Decode(&d)
		p.clearStatus()
		mark := "ok"
		if d.IsError {
			mark = "error"
		}
		fmt.Fprintf(p.stderr, "← %s %s (%d ms): %s\n", d.Name, mark, d.DurationMs, clip(d.Output, 100))
	case event.ModelRetry:
		var d event.ModelRetryData
		_ = e.Decode(&d)
		p.clearStatus()
		fmt.Fprintf(p.stderr, "weft: model request failed (%s); retry %d in %d ms\n", d.Error, d.Attempt, d.DelayMs)
	case event.SteerConsumed:
		var d event.SteerData
		_ = e.Decode(&d)
		p.clearStatus()
		p.endLine()
		fmt.Fprintf(p.stderr, "⇢ steer: %s\n", clip(event.Text(d.Input), 100))
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		var d event.RunEndedData
		_ = e.Decode(&d)
		p.clearStatus()
		p.endLine()
		switch e.Type {
		case event.RunFailed:
			fmt.Fprintf(p.stderr, "weft: run %s failed: %s: %s\n", e.RunID, d.Error.Kind, d.Error.Message)
		case event.RunCancelled:
			fmt.Fprintf(p.stderr, "weft: run %s cancelled\n", e.RunID)
		case event.RunInterrupted:
			fmt.Fprintf(p.stderr, "weft: run %s interrupted\n", e.RunID)
		}
	}
}

// clip shortens s to one line of at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// summary is a one-line rendering of any event for `weft events`.
func summary(e event.Event) string {
	switch e.Type {
	case event.MessageDelta, event.ReasoningDelta:
		var d event.DeltaData
		_ = e.Decode(&d)
		b, _ := json.Marshal(d.Text)
		return string(b)
	}
	return clip(string(e.Data), 160)
}
