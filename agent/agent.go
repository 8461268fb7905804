// Package agent is weft's agent loop: it turns a model, a tool registry and
// a transcript into events. One call to [Execute] is one run: steps of one
// model call plus the tool calls it asked for, run in parallel, until the
// model gives a final answer, the step limit is reached, something fails,
// or the run's context is cancelled.
//
// Every event goes through a [Log], which makes it durable before anyone
// sees it. Whatever ends the run, every tool call that started gets a
// closing result and the run's terminal event is its last event, so the
// transcript is valid for the next run.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/tool"
)

// Log is where a run's events go. Append returns once the events are
// durable; Delta hands over streamed text that the log coalesces.
// The host's journal (host/internal/journal) implements it.
type Log interface {
	Append(ctx context.Context, events ...event.Event) ([]event.Event, error)
	Delta(ctx context.Context, runID string, t event.Type, step int, text string) error
}

// Steer is input injected into an active run.
type Steer struct {
	ID    string
	Input []event.Part
}

// Inbox delivers steering to a run. Implementations are safe for
// concurrent use: the host adds steers while the loop takes them.
type Inbox interface {
	// Take removes and returns the steers waiting now.
	Take() []Steer
	// TakeOrClose removes and returns the waiting steers or, when there
	// are none, closes the inbox so that later steers are refused; the
	// loop calls it when the model gave its final answer.
	TakeOrClose() []Steer
	// Close closes the inbox and returns the steers that were never taken.
	Close() []Steer
}

// RetryPolicy governs retries of a model request that failed before any
// output arrived. Zero fields take the documented defaults.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt; zero means 5, 1 disables retries.
	MaxAttempts int
	// BaseDelay is the first backoff; zero means 500 ms. Each retry doubles it, with full jitter.
	BaseDelay time.Duration
	// MaxDelay caps one backoff; zero means 30 s.
	MaxDelay time.Duration
	// MaxRetryAfter caps a server's Retry-After; zero means 60 s.
	MaxRetryAfter time.Duration
}

// Model is a resolved model: the provider to stream from and the names a
// run records.
type Model struct {
	// Name is the "provider:model" name recorded on runs.
	Name     string
	Provider llm.Provider
	// Model is the provider's own model name.
	Model string
	// MaxTokens caps output tokens per step; zero means the provider's default.
	MaxTokens int
	// ContextWindow is the model's context window in tokens; zero means
	// unknown (see [Config.ContextWindow]).
	ContextWindow int
	// CompactAt is the share of the window that triggers a compaction;
	// zero means [DefaultCompactAt].
	CompactAt float64
	// CompactModel names the model that writes compaction summaries;
	// empty means this one. The host resolves it.
	CompactModel string
	// Price is the model's price; nil means unknown, and the run's usage
	// then carries no cost.
	Price *llm.Price
}

// Config is the fixed part of a run. Zero fields take the documented defaults.
type Config struct {
	// Provider streams model output. Required.
	Provider llm.Provider
	// Model is the provider's model name. Required.
	Model string
	// Tools are offered to the model; nil means none.
	Tools *tool.Registry
	// System is the system prompt; empty means a default that describes the mounts.
	System string
	// MaxSteps caps model calls per run; zero means 50.
	MaxSteps int
	// MaxTokens caps output tokens per step; zero means the provider's default.
	MaxTokens int
	// ToolTimeout caps one tool call; zero means 10 minutes.
	ToolTimeout time.Duration
	// ResultBudget caps a tool result in bytes; zero means 64 KiB.
	ResultBudget int
	// Retry governs model retries.
	Retry RetryPolicy
	// ContextWindow is the model's context window in tokens; zero means
	// unknown: the loop then compacts only when the provider refuses a
	// request as too long.
	ContextWindow int
	// CompactAt is the share of ContextWindow a request may fill before
	// the loop compacts the conversation between steps; zero means
	// [DefaultCompactAt] (80 %).
	CompactAt float64
	// CompactModel writes the summaries of compactions; nil means
	// Provider and Model.
	CompactModel *Model
	// Price, if set, prices each step: its usage event carries the
	// step's cost in US dollars.
	Price *llm.Price
	// Logger receives diagnostics. Nil means silent.
	Logger *slog.Logger
}

// Run is one run to execute.
type Run struct {
	ID        string
	SessionID string
	// ModelName is the "provider:model" name recorded in run.started.
	ModelName string
	// Input is the user input that starts the run.
	Input []event.Part
	// History is the transcript before this run (see [Transcript]). The
	// run does not modify its elements.
	History []llm.Message
	// OwnHistory gives the run History's backing array beyond its length:
	// the run appends its messages there (growing it as append does)
	// instead of copying History first, which costs a run start time and
	// garbage in proportion to the session's history. The caller must not
	// read or write that array past History's length while the run
	// executes, and, unless the run parks ([Outcome.History] then shares
	// it), nothing of the run's refers to the array once Execute returns.
	OwnHistory bool
	// Env returns the session's mounts for each tool call; nil means none.
	Env func() *env.Binding
	// Inbox delivers steering; nil means none.
	Inbox Inbox
	// Background starts the processes tools ask for; nil means tools
	// cannot start any.
	Background tool.Background
	// Gate decides what becomes of each tool call before it runs; nil
	// means every call runs.
	Gate Gate
	// Guard, if set, returns the guard of a call's file access: the call
	// runs with Env()'s Binding guarded by it ([env.Binding.WithGuard]),
	// so that every file it opens, writes or lists is vetted by where it
	// really is, whatever links appear after the Gate decided. how says
	// whether the call runs because the Gate let it or because a person
	// approved it. Nil, or a nil Guard, leaves the Binding unguarded.
	Guard func(call event.ToolCall, how Admission) env.Guard
	// ClientTools are offered to the model beside Config.Tools; their
	// calls are executed by the client (the Gate hands them over).
	ClientTools []llm.ToolSpec
	// Tools, if set, returns the tools of each step in place of
	// Config.Tools: it is called before every step (and before a resumed
	// run settles its calls), so that a set that changes (an MCP server's
	// tools/list_changed) reaches the model at the next step. It must
	// return quickly when nothing changed; nil from it means no tools.
	Tools func(ctx context.Context) *tool.Registry
	// Instructions, if set, are project instructions (AGENTS.md) added to
	// the system prompt and recorded (without their text) in mount.info.
	Instructions *event.Instructions
	// Resume, if set, continues a run that waited for answers: the loop
	// writes no run.started or message.user, settles the waiting step's
	// calls as Resume says, and goes on from there. History is then the
	// conversation up to the assistant message that asked for the calls
	// (see [ResumeState]).
	Resume *Resume
	// MaxSteps overrides Config.MaxSteps when positive.
	MaxSteps int
	// Handover, if set, lets the run's owner stop it at its next step
	// boundary and hand it over (see [Handover]); nil means the run
	// stops only when it ends, parks or is cancelled.
	Handover *Handover
	// TraceID and SpanID, if set, name the run's trace span (hex); the
	// loop records them in run.started.
	TraceID, SpanID string
	// Basis is what is known of History's size in tokens (see
	// [TranscriptBuilder.Basis]); the zero Basis makes the loop estimate
	// it from History's text.
	Basis Basis
	// Budget, if set, is asked at each step boundary, before the model
	// call, whether the run is within its budgets (see [BudgetCheck]).
	Budget BudgetCheck
	// State, if set, describes what must stay reachable across a
	// compaction — live processes with their handles and status, pending
	// requests, mounts — as text for the model: the summary request
	// carries it and the loop re-injects it after the summary. It is
	// called between steps, only when the loop compacts.
	State func(ctx context.Context) string
	// Checkpoint, if set, is called before the tool calls of a step run,
	// with those calls and the binding they run with; the function it
	// returns, if not nil, is called once they have all finished (their
	// results committed) and returns events to append after them, with
	// the run's ID (checkpoint.recorded: what the calls changed in the
	// mounts, for a rewind).
	Checkpoint func(ctx context.Context, b *env.Binding, calls []event.ToolCall) func(ctx context.Context) []event.Event
}

// Outcome is how a run ended; it mirrors the run's terminal event.
type Outcome struct {
	// Type is the terminal event type; empty when the run waits.
	Type event.Type
	// Waiting reports a run that parked because calls wait for answers
	// (approvals, questions, client tools): nothing terminal was written,
	// its requests are open, and it resumes with [Run.Resume] once they
	// are answered.
	Waiting bool
	// Resume and History, for a run that waits, are what it resumes from
	// (as [ResumeState] would read them from the log): apply the answers
	// to Resume ([Resume.Apply]) and pass both back in [Run].
	Resume  *Resume
	History []llm.Message
	// Suspended reports a run stopped at a step boundary for a handover
	// ([Run.Handover]): nothing terminal was written, run.suspended was,
	// and its next owner resumes it from the log ([ResumeState]).
	Suspended bool
	Steps     int
	Usage     event.TokenUsage
	Error     *event.Error
	// Text is the final answer, for a completed run.
	Text string
}

// Error kinds of failed runs.
const (
	KindMaxSteps = "max_steps"
	KindModel    = "model"
	KindLog      = "log"
	// KindTimeout: the model request hit a limit of [llm.Timeouts] on
	// every attempt, or after its output began; the message names the
	// limit (connect, first-byte or idle timeout).
	KindTimeout = "timeout"
	// KindBudgetExceeded: the run reached one of its budgets
	// ([BudgetCheck]); the error's Budget says which.
	KindBudgetExceeded = event.KindBudgetExceeded
)

// Execute runs r to its end and returns how it ended. It writes run.started,
// message.user, then the steps, and exactly one terminal event, which is the
// run's last. A cancelled ctx ends the run as cancelled: the model stream is
// closed, running tools are cancelled (their process groups killed), every
// started tool call is closed with an error result, steers not yet consumed
// are dropped, and run.cancelled is written. Execute returns an error only
// when the log itself fails, in which case the terminal event may be missing
// and the host's recovery closes the run.
func Execute(ctx context.Context, cfg Config, log Log, r Run) (Outcome, error) {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 50
	}
	if r.MaxSteps > 0 {
		cfg.MaxSteps = r.MaxSteps
	}
	if cfg.ToolTimeout <= 0 {
		cfg.ToolTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l := &loop{cfg: cfg, log: log, run: r}
	if r.Budget != nil {
		if at, reached := r.Budget.Deadline(); !at.IsZero() {
			// The wall-time budget cuts the step under way: the model
			// stream closes, running tools are cancelled and closed,
			// and end reads the cause.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadlineCause(ctx, at, &budgetError{reached: reached})
			defer cancel()
		}
	}
	if cfg.ContextWindow > 0 {
		at := cfg.CompactAt
		if at <= 0 || at > 1 {
			at = DefaultCompactAt
		}
		l.win.size = int64(cfg.ContextWindow)
		l.win.compact = int64(float64(cfg.ContextWindow) * at)
	}
	return l.execute(ctx)
}

type loop struct {
	cfg   Config
	log   Log
	run   Run
	usage event.TokenUsage
	steps int
	// gated are the current step's calls that opened requests; a cancel
	// before the run parks closes them.
	gated []gatedCall
	// unstarted are the step's calls whose start the log refused (a
	// cancel raced it): the run's end closes each with an error result.
	unstarted []event.ToolCall
	// parked is what the run resumes from once it parks.
	parked *Resume
	// tools are the current step's tools (see Run.Tools).
	tools *tool.Registry
	// win estimates the size of the next request (see window).
	win window
	// lastSeq is the seq of the last event the loop appended.
	lastSeq int64
}

// stepTools takes the tools of the step about to run.
func (l *loop) stepTools(ctx context.Context) *tool.Registry {
	l.tools = l.cfg.Tools
	if l.run.Tools != nil {
		l.tools = l.run.Tools(ctx)
	}
	return l.tools
}

func (l *loop) emit(ctx context.Context, t event.Type, data any) error {
	e, err := event.New(l.run.ID, t, data)
	if err != nil {
		return err
	}
	return l.emitMany(ctx, []event.Event{e})
}

func (l *loop) emitMany(ctx context.Context, evs []event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	out, err := l.log.Append(ctx, evs...)
	if len(out) > 0 {
		l.lastSeq = out[len(out)-1].Seq
	}
	return err
}

func (l *loop) execute(ctx context.Context) (Outcome, error) {
	if l.run.Resume != nil {
		return l.resume(ctx)
	}
	start := []event.Event{}
	for _, x := range []struct {
		t event.Type
		v any
	}{
		{event.RunStarted, event.RunStartedData{Model: l.run.ModelName, TraceID: l.run.TraceID, SpanID: l.run.SpanID}},
		{event.MessageUser, event.MessageUserData{Content: l.run.Input}},
	} {
		e, err := event.New(l.run.ID, x.t, x.v)
		if err != nil {
			return Outcome{}, err
		}
		start = append(start, e)
	}
	var binding *env.Binding
	if l.run.Env != nil {
		binding = l.run.Env()
	}
	if binding != nil {
		e, err := event.New(l.run.ID, event.MountInfo, event.MountInfoData{
			Binding:      event.Binding{BindingVersion: binding.Version(), Mounts: binding.Mounts()},
			Instructions: l.run.Instructions,
		})
		if err != nil {
			return Outcome{}, err
		}
		start = append(start, e)
	}
	if err := l.emitMany(ctx, start); err != nil {
		return l.end(ctx, err)
	}
	msgs := l.run.History
	if !l.run.OwnHistory {
		// Room for the input and the step's answer beside the history.
		msgs = append(make([]llm.Message, 0, len(l.run.History)+2), l.run.History...)
	}
	msgs = append(msgs, UserMessage(l.run.Input))
	l.startWindow(l.run.History)
	l.win.grow(msgs[len(msgs)-1])
	return l.loopSteps(ctx, binding, msgs)
}

// resume settles the waiting step of a run that parked, then goes on.
func (l *loop) resume(ctx context.Context) (Outcome, error) {
	rs := l.run.Resume
	l.steps, l.usage = rs.Steps, rs.Usage
	if err := l.emit(ctx, event.RunResumed, event.RunResumedData{Step: l.steps}); err != nil {
		return l.end(ctx, err)
	}
	l.stepTools(ctx)
	msgs, err := l.settle(ctx, rs.Calls)
	l.startWindow(l.run.History)
	l.win.grow(msgs...)
	msgs = append(append([]llm.Message(nil), l.run.History...), msgs...)
	if err != nil {
		return l.end(ctx, err)
	}
	if ctx.Err() != nil {
		return l.end(ctx, ctx.Err())
	}
	return l.loopSteps(ctx, l.binding(), msgs)
}

// loopSteps runs steps from msgs until the run ends or parks.
func (l *loop) loopSteps(ctx context.Context, binding *env.Binding, msgs []llm.Message) (Outcome, error) {
	system := l.cfg.System
	if system == "" {
		system = DefaultSystem(binding)
	}
	if in := l.run.Instructions; in != nil && in.Text != "" {
		system += "\n\nProject instructions, from " + in.Path + ":\n" + in.Text
		if in.Truncated {
			system += "\n[… cut at the size cap; read the file for the rest]"
		}
	}
	var (
		final string
		tools []llm.ToolSpec
		reg   *tool.Registry
		built bool
	)
	for {
		// Step boundary: a handover stops the run here, before it takes
		// its steers (they stay accepted in the log for its next owner).
		if why, ok := l.run.Handover.requested(); ok && ctx.Err() == nil {
			return l.suspend(ctx, why, 0)
		}
		// Steering enters here.
		if l.run.Inbox != nil {
			m, err := l.consume(ctx, l.run.Inbox.Take())
			if err != nil {
				return l.end(ctx, err)
			}
			msgs = append(msgs, m...)
			l.win.grow(m...)
		}
		if l.steps >= l.cfg.MaxSteps {
			return l.end(ctx, &runError{kind: KindMaxSteps, msg: fmt.Sprintf("the run reached its limit of %d steps", l.cfg.MaxSteps)})
		}
		if l.run.Budget != nil {
			if o, done, err := l.checkBudget(ctx, msgs); done {
				return o, err
			}
		}
		l.steps++
		if r := l.stepTools(ctx); r != reg || !built {
			reg, built = r, true
			tools = nil // the last step's request may still hold the old slice
			if reg != nil {
				for _, s := range reg.Specs() {
					tools = append(tools, llm.ToolSpec{Name: s.Name, Description: s.Description, InputSchema: s.InputSchema})
				}
			}
			tools = append(tools, l.run.ClientTools...)
			l.win.fixed = int64(len(system)) + specsBytes(tools)
		}
		if l.win.needs() {
			// Between steps, before this one: the conversation would
			// fill more than its share of the window.
			var err error
			if msgs, err = l.compact(ctx, msgs, tools, event.CompactThreshold); err != nil {
				return l.end(ctx, err)
			}
		}
		if err := l.emit(ctx, event.StepStarted, event.StepData{Step: l.steps}); err != nil {
			return l.end(ctx, err)
		}
		req := &llm.Request{Model: l.cfg.Model, System: system, Messages: msgs, Tools: tools, MaxTokens: l.cfg.MaxTokens}
		out, err := l.stream(ctx, req)
		if err != nil && overflowed(err) && ctx.Err() == nil {
			// The provider refused the request as too long: compact
			// once and retry the step.
			l.win.fresh = false
			if msgs, err = l.compact(ctx, msgs, tools, event.CompactOverflow); err != nil {
				return l.end(ctx, err)
			}
			req = &llm.Request{Model: l.cfg.Model, System: system, Messages: msgs, Tools: tools, MaxTokens: l.cfg.MaxTokens}
			if out, err = l.stream(ctx, req); err != nil && overflowed(err) {
				le, _ := llm.AsError(err)
				err = &runError{kind: KindContextOverflow, msg: fmt.Sprintf(
					"the model refused step %d as too long even after compaction (about %d tokens estimated%s): %v", l.steps, l.win.estimate(), l.windowText(), le)}
			}
		}
		if errors.Is(err, errHandedOver) {
			// The handover cut the model call: the step's output is
			// discarded, and the next owner asks again.
			why, _ := l.run.Handover.requested()
			return l.suspend(ctx, why, l.steps)
		}
		if err != nil {
			return l.end(ctx, err)
		}
		l.win.fresh = false
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: out.Text, Reasoning: out.Reasoning, ToolCalls: out.ToolCalls, ProviderState: out.ProviderState})
		l.win.reported(out.Usage, msgs[len(msgs)-1])
		if len(out.ToolCalls) == 0 {
			final = out.Text
			if l.run.Inbox != nil {
				// A steer that arrived during the final answer gets one more step.
				steers := l.run.Inbox.TakeOrClose()
				if len(steers) > 0 {
					m, err := l.consume(ctx, steers)
					if err != nil {
						return l.end(ctx, err)
					}
					msgs = append(msgs, m...)
					l.win.grow(m...)
					continue
				}
			}
			o, err := l.end(ctx, nil)
			o.Text = final
			return o, err
		}
		results, err := l.callTools(ctx, out.ToolCalls)
		if errors.Is(err, errWaiting) {
			// msgs ends with the assistant message that asked for the calls.
			return Outcome{Waiting: true, Steps: l.steps, Usage: l.usage, Resume: l.parked, History: slices.Clip(msgs)}, nil
		}
		msgs = append(msgs, results...)
		l.win.grow(results...)
		if err != nil {
			return l.end(ctx, err)
		}
		if ctx.Err() != nil {
			return l.end(ctx, ctx.Err())
		}
	}
}

// startWindow takes the estimate of history's size from Run.Basis, or
// from its text when the basis is unknown.
func (l *loop) startWindow(history []llm.Message) {
	if l.win.compact == 0 {
		return
	}
	if b := l.run.Basis; b.Tokens > 0 || b.Bytes > 0 {
		l.win.basis, l.win.added = b.Tokens, b.Bytes
		return
	}
	l.win.grow(history...)
}

// specsBytes is the text of tools a model reads, in bytes.
func specsBytes(tools []llm.ToolSpec) int64 {
	var n int64
	for _, t := range tools {
		n += int64(16 + len(t.Name) + len(t.Description) + len(t.InputSchema))
	}
	return n
}

// consume writes steer.consumed for steers and returns them as user
// messages. The step they enter is the next one.
func (l *loop) consume(ctx context.Context, steers []Steer) ([]llm.Message, error) {
	if len(steers) == 0 {
		return nil, nil
	}
	evs := make([]event.Event, 0, len(steers))
	msgs := make([]llm.Message, 0, len(steers))
	for _, s := range steers {
		e, err := event.New(l.run.ID, event.SteerConsumed, event.SteerData{SteerID: s.ID, Input: s.Input, Step: l.steps + 1})
		if err != nil {
			return nil, err
		}
		evs = append(evs, e)
		msgs = append(msgs, UserMessage(s.Input))
	}
	return msgs, l.emitMany(ctx, evs)
}

// runError is a failure that ends the run as failed with a kind.
type runError struct {
	kind      string
	msg       string
	retryable bool
}

func (e *runError) Error() string { return e.kind + ": " + e.msg }

// modelErrorKind is the kind of a run that failed with le.
func modelErrorKind(le *llm.Error) string {
	switch le.Kind {
	case llm.KindTimeout:
		return KindTimeout
	case llm.KindContextOverflow:
		return KindContextOverflow
	}
	return KindModel
}

// end writes the run's terminal event for cause (nil: completed) and
// closes the inbox, dropping steers that were never consumed.
func (l *loop) end(ctx context.Context, cause error) (Outcome, error) {
	o := Outcome{Steps: l.steps, Usage: l.usage}
	var reason string
	var be *budgetError
	var ie *Interrupt
	if c, ok := context.Cause(ctx).(*budgetError); ok && ctx.Err() != nil {
		// The wall-time budget's timer cut the step: that is the
		// budget, not a cancel.
		cause = c
	}
	switch {
	case errors.As(cause, &be):
		o.Type = event.RunFailed
		r := be.reached
		o.Error = &event.Error{Kind: KindBudgetExceeded, Message: "the run reached " + r.String(), Budget: &r}
	case cause == nil:
		o.Type = event.RunCompleted
	case ctx.Err() != nil && errors.As(context.Cause(ctx), &ie):
		// The host stopped under the run and could not hand it over.
		o.Type = event.RunInterrupted
		o.Error = &event.Error{Kind: ie.Kind, Message: ie.Message}
	case ctx.Err() != nil && (errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) || errors.Is(cause, ctx.Err())):
		o.Type = event.RunCancelled
		reason = cancelReason(ctx)
	default:
		o.Type = event.RunFailed
		var re *runError
		var le *llm.Error
		switch {
		case errors.As(cause, &re):
			o.Error = &event.Error{Kind: re.kind, Message: re.msg, Retryable: re.retryable}
		case errors.As(cause, &le):
			o.Error = &event.Error{Kind: modelErrorKind(le), Message: le.Error(), Retryable: le.Retryable}
		default:
			o.Error = &event.Error{Kind: KindLog, Message: cause.Error()}
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// Requests the step opened close with the run: no call is left open.
	gated := l.gatedRequests()
	gatedWhy := "the run ended"
	if o.Type == event.RunCancelled {
		gatedWhy = "the run was cancelled"
	}
	var evs []event.Event
	for _, c := range l.unstarted {
		e, err := event.New(l.run.ID, event.ToolCallCompleted, event.ToolCallCompletedData{ID: c.ID, Name: c.Name, IsError: true,
			Output: "error: " + gatedWhy + " before this tool call started; it did not run"})
		if err != nil {
			return o, err
		}
		evs = append(evs, e)
	}
	if l.run.Inbox != nil {
		why := "the run ended before the steer was consumed"
		if o.Type == event.RunCancelled {
			why = "the run was cancelled before the steer was consumed"
		} else if o.Type == event.RunFailed {
			why = "the run failed before the steer was consumed"
		}
		for _, s := range l.run.Inbox.Close() {
			e, err := event.New(l.run.ID, event.SteerDropped, event.SteerData{SteerID: s.ID, Input: s.Input, Reason: why})
			if err != nil {
				return o, err
			}
			evs = append(evs, e)
		}
	}
	e, err := event.New(l.run.ID, o.Type, event.RunEndedData{Steps: o.Steps, Usage: o.Usage, Error: o.Error, Reason: reason})
	if err != nil {
		return o, err
	}
	evs = append(evs, e)
	if el, ok := l.log.(EndLog); ok && len(gated) > 0 {
		// Others may have answered some of the requests meanwhile: the
		// log decides what is still open as it commits.
		_, err = el.AppendEnd(wctx, l.run.ID, gated, gatedWhy, evs...)
	} else {
		var closing []event.Event
		if closing, err = CloseGated(l.run.ID, gated, nil, gatedWhy); err != nil {
			return o, err
		}
		err = l.emitMany(wctx, append(closing, evs...))
	}
	if err != nil {
		return o, fmt.Errorf("run %s: write %s: %w", l.run.ID, o.Type, err)
	}
	return o, nil
}

// cancelReason is the reason recorded in run.cancelled: the cause given to
// context.WithCancelCause by whoever cancelled the run, if any.
func cancelReason(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "cancelled"
}

// DefaultSystem is the system prompt used when Config.System is empty: it
// tells the model where its files are.
func DefaultSystem(b *env.Binding) string {
	var sb strings.Builder
	sb.WriteString("You are a capable software agent working through tools. ")
	if b == nil || len(b.Mounts()) == 0 {
		sb.WriteString("No directories are mounted.")
		return sb.String()
	}
	sb.WriteString("Your files live in mounted directories:\n")
	for _, m := range b.Mounts() {
		fmt.Fprintf(&sb, "- /environment/%s (%s", m.ID, map[string]string{event.ModeReadOnly: "read-only", event.ModeReadWrite: "read-write"}[m.Mode])
		if m.Default {
			sb.WriteString(", default: relative paths resolve here")
		}
		if m.DefaultForShell {
			sb.WriteString(", shell commands start here")
		}
		sb.WriteString(")\n")
	}
	sb.WriteString("File tools take /environment/... paths or paths relative to the default mount. " +
		"Shell commands see the mounts at their host directories, which the environment variables below also hold:\n")
	for _, m := range b.Mounts() {
		fmt.Fprintf(&sb, "- /environment/%s is %s in the shell ($%s)\n", m.ID, m.Path, env.MountVar(m.ID))
	}
	sb.WriteString("Paths outside these mounts are not reachable.")
	return sb.String()
}

// backoff returns the delay before retry number attempt (1-based): full
// jitter over an exponentially growing cap, or the server's Retry-After.
func (p RetryPolicy) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, p.MaxRetryAfter)
	}
	d := p.BaseDelay << (attempt - 1)
	if d <= 0 || d > p.MaxDelay {
		d = p.MaxDelay
	}
	return d/2 + rand.N(d/2+1)
}

func (p *RetryPolicy) defaults() {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 500 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 60 * time.Second
	}
}
