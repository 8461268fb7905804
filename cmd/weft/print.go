package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// printer renders a run's events for people: assistant text on stdout as
// it arrives, tool calls compactly on stderr, with a status line when
// stderr is a terminal: what the run does, the time since it started,
// the tokens it used.
type printer struct {
	stdout, stderr io.Writer
	json           bool
	tty            bool
	// showUser prints the user's input (message.user) and steering, for
	// a watcher who did not type it.
	showUser bool
	// hold keeps the status line hidden (a prompt has the line).
	hold    bool
	status  bool // a status line is showing
	midLine bool // stdout does not end in a newline
	phase   string
	started time.Time // of the run, when known
	tokens  int64
	cost    float64 // in US dollars
}

func (p *printer) clearStatus() {
	if p.status {
		fmt.Fprint(p.stderr, "\r\033[2K")
		p.status = false
	}
}

// setStatus says what the run does now, on the status line.
func (p *printer) setStatus(s string) {
	p.phase = s
	p.drawStatus()
}

// drawStatus draws the status line again (the elapsed time moves on).
func (p *printer) drawStatus() {
	if !p.tty || p.hold || p.phase == "" {
		return
	}
	p.clearStatus()
	s := p.phase
	if !p.started.IsZero() {
		s += " · " + time.Since(p.started).Truncate(time.Second).String()
	}
	if p.tokens > 0 {
		s += fmt.Sprintf(" · %s tokens", compactCount(p.tokens))
	}
	if p.cost > 0 {
		s += " · " + usd(p.cost)
	}
	if p.midLine {
		// The answer's line is still open: draw below it, not over it.
		return
	}
	fmt.Fprint(p.stderr, "\033[2m· "+s+"\033[0m")
	p.status = true
}

// compactCount is n as 950, 1.2k or 3.4M.
// usd renders a cost in US dollars: cents for a dollar or more, else
// four decimals, so that a cheap step does not read as free.
func usd(v float64) string {
	if v >= 1 {
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.4f", v)
}

// sessionSpend is what a session's runs spent, for weft sessions:
// "12.3k tok $0.0412 of $5.00", or "" for none.
func sessionSpend(s record.Session) string {
	n := s.Usage.InputTokens + s.Usage.OutputTokens
	if n == 0 && s.Usage.CostUSD == 0 {
		return ""
	}
	out := compactCount(n) + " tok"
	if s.Usage.CostUSD > 0 {
		out += " " + usd(s.Usage.CostUSD)
	}
	if b := s.Budget; b != nil && b.CostUSD > 0 {
		out += " of " + usd(b.CostUSD)
	}
	return out
}

func compactCount(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1_000_000)
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
	case event.RunStarted:
		p.started, p.tokens, p.cost = e.Time, 0, 0
		p.setStatus("starting")
	case event.MessageUser:
		if p.showUser {
			var d event.MessageUserData
			_ = e.Decode(&d)
			p.clearStatus()
			p.endLine()
			fmt.Fprintf(p.stdout, "› %s%s\n", clip(event.Text(d.Content), 400), imagesNote(d.Content))
		}
	case event.Usage:
		var d event.UsageData
		_ = e.Decode(&d)
		p.tokens += d.Usage.InputTokens + d.Usage.OutputTokens
		p.cost += d.Usage.CostUSD
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
		fmt.Fprintf(p.stderr, "← %s %s (%d ms): %s%s\n", d.Name, mark, d.DurationMs, clip(d.Output, 100), imagesNote(d.Attachments))
	case event.ToolProgress:
		var d event.ToolProgressData
		_ = e.Decode(&d)
		status := fmt.Sprintf("%s: %g", d.Name, d.Progress)
		if d.Total > 0 {
			status += fmt.Sprintf("/%g", d.Total)
		}
		if d.Message != "" {
			status += " " + clip(d.Message, 60)
		}
		p.setStatus(status)
	case event.ApprovalRequested:
		var d event.ApprovalRequestedData
		_ = e.Decode(&d)
		p.setStatus("waiting for approval of " + d.ToolCall.Name)
	case event.InputRequested:
		p.setStatus("waiting for an answer")
	case event.ToolCallRequested:
		var d event.ToolCallRequestedData
		_ = e.Decode(&d)
		p.setStatus("waiting for the client's " + d.ToolCall.Name)
	case event.RunResumed:
		p.setStatus("resuming")
	case event.RunSuspended:
		var d event.RunSuspendedData
		_ = e.Decode(&d)
		p.clearStatus()
		p.endLine()
		if d.CutStep > 0 {
			fmt.Fprintf(p.stderr, "weft: %s: the run is handed over to the next host; step %d's text above is discarded and asked for again\n", d.Reason, d.CutStep)
		} else {
			fmt.Fprintf(p.stderr, "weft: %s: the run is handed over to the next host\n", d.Reason)
		}
		p.setStatus("handed over")
	case event.ModelRetry:
		var d event.ModelRetryData
		_ = e.Decode(&d)
		p.clearStatus()
		fmt.Fprintf(p.stderr, "weft: model request failed (%s); retry %d in %d ms\n", d.Error, d.Attempt, d.DelayMs)
	case event.ContextCompacted:
		var d event.ContextCompactedData
		_ = e.Decode(&d)
		p.clearStatus()
		p.endLine()
		fmt.Fprintf(p.stderr, "⇣ context compacted (%s): about %d tokens → %d\n", d.Reason, d.TokensBefore, d.TokensAfter)
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
		p.phase = ""
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

// imagesNote says which images parts hold (" [image/png 5120 bytes]"),
// or nothing.
func imagesNote(parts []event.Part) string {
	var b strings.Builder
	for _, im := range event.Images(parts) {
		fmt.Fprintf(&b, " [%s %d bytes]", im.MediaType, len(im.Data))
	}
	return b.String()
}
