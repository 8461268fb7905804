package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// requestMode says what a watcher does with a request (an approval or a
// question) of the runs it watches.
type requestMode int

const (
	// askInline: a person at the terminal answers it.
	askInline requestMode = iota
	// failFast: no one can answer: the run is cancelled and the command
	// fails, saying so.
	failFast
	// noteOnly: print how to answer it from elsewhere, and wait.
	noteOnly
)

// interruptMode says what Ctrl-C does while a watcher runs.
type interruptMode int

const (
	// cancelThenExit (weft run): the first cancels the run, the second
	// exits at once.
	cancelThenExit interruptMode = iota
	// detachOnly (weft attach): stops watching; the run goes on.
	detachOnly
)

// errDetached ends a watch that Ctrl-C detached.
var errDetached = errors.New("detached; the run continues")

// pending is a request the watcher has seen open.
type pending struct {
	id, kind, runID string
	call            event.ToolCall
	rule            event.Rule
	options         []string
	always          *event.Rule // what allow_session adds
	question        string
	choices         []string
}

// watcher prints the events of a session's runs as they come and deals
// with their requests and with Ctrl-C. It is used by one goroutine.
type watcher struct {
	a  *app
	c  *conn
	pr *printer
	// tty, when set, is the terminal a person answers requests at.
	tty       *os.File
	requests  requestMode
	interrupt interruptMode
	sessionID string
	// runID is the run to watch until it ends; "" watches every run of
	// the session until interrupted.
	runID string
	// replayTo is the last seq of the replay: a request seen in the
	// replay is asked only if it is in open.
	replayTo int64
	open     map[string]bool

	queue      []*pending
	asking     *pending
	askDone    chan askResult // the prompt of the request asked ends
	askStop    context.CancelFunc
	answered   map[string]bool // requests answered here
	cancelling bool
	cancelled  chan error
	failure    error // why a failFast watcher cancelled the run
	wg         sync.WaitGroup
}

// watch prints the events follow yields until the watched run ends, and
// returns its terminal event; or until ctx ends or a detach
// (errDetached). follow's iterator must end when its ctx does.
func (w *watcher) watch(ctx context.Context, follow func(context.Context) iter.Seq2[event.Event, error]) (event.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	events := follow(ctx)
	type item struct {
		e   event.Event
		err error
	}
	evc := make(chan item, 64)
	w.wg.Go(func() {
		defer close(evc)
		for e, err := range events {
			select {
			case evc <- item{e, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	defer func() {
		cancel()
		w.wg.Wait()
	}()
	w.answered = map[string]bool{}
	w.cancelled = make(chan error, 1)
	w.askDone = make(chan askResult, 1)
	defer w.stopAsking()
	var tick <-chan time.Time
	if w.pr.tty && !w.pr.json {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case it, ok := <-evc:
			if !ok {
				return event.Event{}, ctx.Err()
			}
			if it.err != nil {
				return event.Event{}, it.err
			}
			if w.event(ctx, it.e) {
				return it.e, nil
			}
		case r := <-w.askDone:
			if err := w.asked(ctx, r); err != nil {
				return event.Event{}, err
			}
		case <-w.a.interrupts:
			if err := w.interrupted(ctx); err != nil {
				return event.Event{}, err
			}
		case err := <-w.cancelled:
			if err != nil {
				w.say("weft: cancel: %v", err)
			}
		case <-tick:
			w.pr.drawStatus()
		}
	}
}

// say prints a line on stderr, keeping the prompt and status lines in
// place.
func (w *watcher) say(format string, args ...any) {
	w.pr.clearStatus()
	w.pr.endLine()
	fmt.Fprintf(w.a.stderr, format+"\n", args...)
	w.redraw()
}

// redraw shows the status line (none while a request is asked).
func (w *watcher) redraw() {
	if w.asking == nil {
		w.pr.drawStatus()
	}
}

// event handles one event; it reports whether the watch is over.
func (w *watcher) event(ctx context.Context, e event.Event) bool {
	e = unwrapSubagent(e) // a subagent's request is asked here too
	w.pr.print(e)
	mine := w.runID == "" || e.RunID == w.runID
	switch e.Type {
	case event.ApprovalRequested, event.InputRequested:
		p := requestOf(e)
		if !mine || e.Seq <= w.replayTo && !w.open[p.id] {
			break
		}
		switch w.requests {
		case askInline:
			if !slices.ContainsFunc(w.queue, func(q *pending) bool { return q.id == p.id }) {
				w.queue = append(w.queue, p)
			}
		case failFast:
			w.failFast(ctx, p)
		case noteOnly:
			w.note(p)
		}
	case event.ApprovalResolved, event.ApprovalExpired, event.InputResolved:
		w.resolved(e)
	}
	if mine && e.RunID != "" && event.IsTerminalRun(e.Type) {
		w.queue = nil
		w.stopAsking()
		if w.runID != "" {
			return true
		}
	}
	if w.asking == nil && len(w.queue) > 0 && w.requests == askInline {
		w.ask(ctx, w.queue[0])
		return false
	}
	w.redraw()
	return false
}

// unwrapSubagent returns the child's request event that a
// subagent.request in the parent's log mirrors (under the parent's run
// and seq, so that it is handled as the parent's), or e itself.
func unwrapSubagent(e event.Event) event.Event {
	if e.Type != event.SubagentRequest {
		return e
	}
	var d event.SubagentRequestData
	if e.Decode(&d) != nil || d.Event == "" {
		return e
	}
	e.Type, e.Data = d.Event, d.Data
	return e
}

// requestOf reads the request an approval.requested or input.requested
// opens.
func requestOf(e event.Event) *pending {
	p := &pending{runID: e.RunID}
	if e.Type == event.ApprovalRequested {
		var d event.ApprovalRequestedData
		_ = e.Decode(&d)
		p.id, p.kind, p.call, p.rule = d.ApprovalID, event.RequestApproval, d.ToolCall, d.Rule
		p.options, p.always = d.Options, d.SessionRule
		return p
	}
	var d event.InputRequestedData
	_ = e.Decode(&d)
	p.id, p.kind, p.call, p.question, p.choices = d.RequestID, event.RequestInput, d.ToolCall, d.Question, d.Choices
	return p
}

// resolved handles the end of a request: answered here, elsewhere, or
// expired.
func (w *watcher) resolved(e event.Event) {
	var id, what string
	var by event.By
	switch e.Type {
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		_ = e.Decode(&d)
		id, what, by = d.ApprovalID, d.Decision, d.By
		if e.Type == event.ApprovalExpired {
			what = "expired: " + d.Decision
		}
	default:
		var d event.InputResolvedData
		_ = e.Decode(&d)
		id, what, by = d.RequestID, d.Status, d.By
		if d.Status == event.InputAnswered {
			what = "answered " + strconv.Quote(clip(d.Text, 60))
		}
	}
	w.queue = slices.DeleteFunc(w.queue, func(q *pending) bool { return q.id == id })
	if w.answered[id] {
		return // said under its call when it was answered
	}
	if w.asking != nil && w.asking.id == id {
		w.stopAsking()
		w.say("  already answered by %s: %s", who(by), what)
		return
	}
	if w.requests != askInline && e.Seq > w.replayTo {
		w.say("weft: request %s %s by %s", id, what, who(by))
	}
}

// decisionWords says a decision in words.
func decisionWords(d string) string {
	switch d {
	case event.DecisionAllowOnce:
		return "allowed once"
	case event.DecisionAllowSession:
		return "allowed for this session"
	case event.DecisionDeny:
		return "denied"
	}
	return d
}

// who names who answered a request.
func who(by event.By) string {
	switch {
	case by.Policy == "cancel":
		return "the run's end"
	case by.Policy != "":
		return by.Policy
	case by.Client != "":
		return by.Client
	case by.Transport != "":
		return "a client (" + by.Transport + ")"
	}
	return "another client"
}

// askResult is how the prompt of a request ended.
type askResult struct {
	p           *pending
	ans         *answer
	interrupted bool
	err         error
}

// ask shows request p at the terminal and reads its answer, in a
// goroutine the watcher owns; the answer arrives on w.askDone.
func (w *watcher) ask(ctx context.Context, p *pending) {
	w.asking = p
	w.pr.clearStatus()
	w.pr.endLine()
	w.pr.hold = true
	actx, stop := context.WithCancel(ctx)
	w.askStop = stop
	k := newAsker(p)
	k.waiting = len(w.queue) - 1
	m := &askProgram{k: k, th: newTheme()}
	prog := tea.NewProgram(m, tea.WithContext(actx), tea.WithInput(w.tty), tea.WithOutput(w.a.stderr), tea.WithoutSignalHandler())
	done := w.askDone
	w.wg.Go(func() {
		_, err := prog.Run()
		if actx.Err() != nil {
			return // stopped: the request was answered elsewhere, or the run ended
		}
		done <- askResult{p: p, ans: m.ans, interrupted: m.interrupted, err: err}
	})
}

// stopAsking ends the prompt of the request asked, if any.
func (w *watcher) stopAsking() {
	if w.askStop != nil {
		w.askStop()
		w.askStop = nil
	}
	w.asking = nil
	w.pr.hold = false
}

// asked handles the end of a request's prompt.
func (w *watcher) asked(ctx context.Context, r askResult) error {
	if w.asking != r.p {
		return nil
	}
	w.askStop()
	w.askStop = nil
	switch {
	case r.interrupted:
		return w.interrupted(ctx)
	case r.err != nil:
		w.asking = nil
		w.pr.hold = false
		return fmt.Errorf("the prompt of %s: %w", r.p.id, r.err)
	}
	p, ans := r.p, *r.ans
	var err error
	if p.kind == event.RequestInput {
		_, err = w.c.h.AnswerInput(ctx, api.AnswerParams{RequestID: p.id, SessionID: w.sessionID, Choice: ans.choice, Text: ans.text})
	} else {
		_, err = w.c.h.DecideApproval(ctx, api.DecideParams{ApprovalID: p.id, SessionID: w.sessionID, Decision: ans.decision, Message: ans.message})
	}
	w.asking = nil
	w.pr.hold = false
	w.queue = slices.DeleteFunc(w.queue, func(q *pending) bool { return q.id == p.id })
	var ae *api.Error
	switch {
	case err == nil:
		// Under the request it answers, before the next is asked.
		w.answered[p.id] = true
		fmt.Fprintf(w.a.stderr, "  → %s\n", ans.words(p))
	case errors.As(err, &ae) && ae.Kind == api.KindAlreadyResolved:
		w.answered[p.id] = true
		by, _ := ae.Data["resolvedBy"].(string)
		if by == "" {
			by = "another client"
		}
		what, _ := ae.Data["decision"].(string)
		if what == "" {
			what, _ = ae.Data["status"].(string)
		}
		fmt.Fprintf(w.a.stderr, "  already answered by %s: %s\n", by, what)
	default:
		fmt.Fprintf(w.a.stderr, "  weft: %v\n", err)
		// Not answered: ask again.
		w.queue = append([]*pending{p}, w.queue...)
	}
	if len(w.queue) > 0 {
		w.ask(ctx, w.queue[0])
		return nil
	}
	w.redraw()
	return nil
}

// failFast cancels the run because no one can answer p.
func (w *watcher) failFast(ctx context.Context, p *pending) {
	if w.failure != nil {
		return
	}
	what := "approval of " + p.call.Name + " " + callSummary(p.call)
	if why := ruleSummary(p.rule); why != "" {
		// Say which rule asked: --approve does not replace a preset
		// that a `weft serve`'s config file names.
		what += " (" + why + ")"
	}
	if p.kind == event.RequestInput {
		what = "an answer to " + strconv.Quote(p.question)
	}
	w.failure = fmt.Errorf("the run needed %s and no one is at a terminal to answer, so it was cancelled: "+
		"run on a terminal, pass --approve never-ask for approvals, or --wait-for-answers to answer with `weft approve|deny|answer %s` through `weft serve`", what, p.id)
	w.say("weft: %s needs an answer; no terminal is attached: cancelling the run", p.id)
	w.cancel(ctx, p.runID, "a request needed an answer and no one was attached: "+p.id)
}

// note says how to answer p from elsewhere.
func (w *watcher) note(p *pending) {
	if p.kind == event.RequestInput {
		choices := ""
		if len(p.choices) > 0 {
			var cs []string
			for i, c := range p.choices {
				cs = append(cs, fmt.Sprintf("%d) %s", i+1, c))
			}
			choices = " [" + strings.Join(cs, ", ") + "]"
		}
		w.say("weft: question %s: %s%s — answer with `weft answer %s TEXT`", p.id, p.question, choices, p.id)
		return
	}
	w.say("weft: approval %s: %s %s — `weft approve %s` or `weft deny %s -m WHY`", p.id, p.call.Name, callSummary(p.call), p.id, p.id)
}

// interrupted handles Ctrl-C (a key, or SIGINT).
func (w *watcher) interrupted(ctx context.Context) error {
	switch {
	case w.interrupt == detachOnly:
		return errDetached
	case w.cancelling && w.interrupt == cancelThenExit:
		w.stopAsking()
		fmt.Fprintln(w.a.stderr, "\nweft: second interrupt: exiting now")
		os.Exit(exitCancelled)
	case w.cancelling:
		w.say("weft: cancelling…")
		return nil
	}
	w.queue = nil
	w.stopAsking()
	w.say("weft: cancelling the run…")
	w.cancel(ctx, w.runID, "interrupted by the user")
	return nil
}

// cancel cancels run id in the background; the run's terminal event
// follows in the stream.
func (w *watcher) cancel(ctx context.Context, runID, reason string) {
	if runID == "" || w.cancelling {
		return
	}
	w.cancelling = true
	w.wg.Go(func() {
		_, err := w.c.h.CancelRun(context.WithoutCancel(ctx), api.CancelParams{RunID: runID, Reason: reason})
		w.cancelled <- err
	})
}

// callSummary is a tool call's arguments, compactly: a shell's command, a
// file tool's path, else the JSON.
func callSummary(c event.ToolCall) string {
	var args map[string]any
	if json.Unmarshal([]byte(c.Arguments), &args) != nil {
		return clip(c.Arguments, 100)
	}
	str := func(k string) string { s, _ := args[k].(string); return s }
	switch c.Name {
	case api.ToolShell:
		s := clip(str("command"), 200)
		if cwd := str("cwd"); cwd != "" {
			s += "  (in " + cwd + ")"
		}
		if b, _ := args["background"].(bool); b {
			s += "  (background)"
		}
		return s
	case api.ToolWriteFile, api.ToolEditFile, api.ToolReadFile, api.ToolListDir:
		if p := str("path"); p != "" {
			if c.Name == api.ToolWriteFile {
				return fmt.Sprintf("%s (%s)", p, countOf(len(str("content")), "byte"))
			}
			return p
		}
	}
	return clip(c.Arguments, 100)
}

// ruleSummary says which rule asked.
// offersAlways reports whether the approval takes allow_session (a final
// rule's does not). A request from before options were recorded takes it.
func (p *pending) offersAlways() bool {
	return len(p.options) == 0 || slices.Contains(p.options, event.DecisionAllowSession)
}

// alwaysSummary says what an "always for this session" rule allows.
func alwaysSummary(r event.Rule) string {
	var m api.Match
	_ = json.Unmarshal(r.Match, &m)
	switch {
	case m.CommandExact != "":
		return "this exact command again"
	case m.Mount != "":
		return fmt.Sprintf("every %s call in mount %s", r.Tool, m.Mount)
	case m.Path != "" || m.Command != "" || m.CommandRegex != "":
		return "no other call" // a rule that matches nothing more
	}
	return "every " + r.Tool + " call"
}

func ruleSummary(r event.Rule) string {
	var parts []string
	if r.Reason != "" {
		parts = append(parts, r.Reason)
	}
	if r.Source != "" {
		parts = append(parts, r.Source)
	}
	return strings.Join(parts, " · ")
}

// countOf is n and noun, plural unless n is 1: "1 byte", "2 bytes".
func countOf[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
