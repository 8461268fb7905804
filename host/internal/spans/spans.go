// Package spans turns a session's runs into OpenTelemetry spans: one
// span per execution of a run (its first start, and each resume after it
// waited for answers), and under it one per step, per model call and per
// tool call. The run's span is started by the run's goroutine before
// run.started is written, so that the event (and the run's record)
// carries its trace and span IDs; the spans below it are built from the
// session's committed events, stamped with the events' times and seqs, so
// that a trace says exactly what the log says and nothing the log does
// not hold.
//
// Prompts, outputs, tool arguments and results stay out of spans unless
// [Options.Content] is set. A nil *Tracer or *Session traces nothing, at
// the cost of a nil check: the host builds none when tracing is off.
package spans

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"weft.dev/weft/event"
)

// scope is the instrumentation scope of weft's spans.
const scope = "weft.dev/weft/host"

// maxContent bounds one content attribute (a prompt, an output, a tool
// call's arguments or result) in bytes; longer text is cut at a rune
// boundary and marked.
const maxContent = 16 << 10

// Options are a [Tracer]'s settings.
type Options struct {
	// Content records the text of runs in their spans: the user's input
	// (gen_ai.input.messages on the run's span), the model's output
	// (gen_ai.output.messages on the model call's), and tool calls'
	// arguments and results (gen_ai.tool.call.arguments and .result),
	// each cut to 16 KiB. False records counts, names, IDs and tokens
	// only.
	Content bool
}

// Tracer makes the spans of a host's sessions. It is safe for concurrent
// use; a nil *Tracer traces nothing.
type Tracer struct {
	tracer  trace.Tracer
	content bool
}

// New returns a Tracer whose spans tp makes, or nil when tp is nil.
func New(tp trace.TracerProvider, o Options) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{tracer: tp.Tracer(scope), content: o.Content}
}

// Session returns the tracer of session id's runs, or nil when t is nil.
func (t *Tracer) Session(id string) *Session {
	if t == nil {
		return nil
	}
	return &Session{t: t, id: id, runs: map[string]*run{}}
}

// Session holds the open spans of one session's runs. Its methods are
// safe for concurrent use: StartRun and EndRun are called by a run's
// goroutine, Observe by the session's journal writer. A nil *Session
// traces nothing.
type Session struct {
	t  *Tracer
	id string

	mu   sync.Mutex
	runs map[string]*run // by run ID, while a run executes
}

// run is the open spans of one executing run.
type run struct {
	ctx   context.Context // holds span
	span  trace.Span
	model string // "provider:model"

	stepCtx context.Context // holds step; nil between steps
	step    trace.Span
	call    trace.Span // the model call of the step; nil once it ended
	tools   map[string]trace.Span
}

// Parent names the span a resumed run's span continues: the span of the
// run's first execution (record.Run.TraceID and SpanID). The zero Parent
// starts a new trace.
type Parent struct {
	TraceID, SpanID string
}

// StartRun starts the span of an execution of run runID with model
// ("provider:model") and returns its trace and span IDs in hex. A run
// that resumes names the span of its first execution as parent, so that
// all of a run's executions, across parks and host restarts, are one
// trace. It returns empty IDs when s is nil.
func (s *Session) StartRun(runID, model string, parent Parent) (traceID, spanID string) {
	if s == nil {
		return "", ""
	}
	ctx := context.Background()
	resumed := false
	if tid, err := trace.TraceIDFromHex(parent.TraceID); err == nil {
		if sid, err := trace.SpanIDFromHex(parent.SpanID); err == nil {
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
			}))
			resumed = true
		}
	}
	provider, name := splitModel(model)
	ctx, span := s.t.tracer.Start(ctx, "invoke_agent weft", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", "weft"),
			attribute.String("gen_ai.conversation.id", s.id),
			attribute.String("gen_ai.provider.name", provider),
			attribute.String("gen_ai.request.model", name),
			attribute.String("weft.session.id", s.id),
			attribute.String("weft.run.id", runID),
			attribute.Bool("weft.run.resumed", resumed),
		))
	s.mu.Lock()
	s.runs[runID] = &run{ctx: ctx, span: span, model: model}
	s.mu.Unlock()
	sc := span.SpanContext()
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// EndRun ends the span of run runID's execution, with the open spans
// under it, if its terminal event has not ended them already. outcome
// is the run's terminal event type, or empty for a run that parked to
// wait for answers (its next execution is a new span).
func (s *Session) EndRun(runID string, outcome event.Type) {
	if s == nil {
		return
	}
	s.mu.Lock()
	r := s.runs[runID]
	delete(s.runs, runID)
	s.mu.Unlock()
	if r == nil {
		return
	}
	now := time.Now()
	r.endStep(now)
	if outcome == "" {
		r.span.SetAttributes(attribute.String("weft.run.status", "waiting"))
	} else {
		r.span.SetAttributes(attribute.String("weft.run.status", runStatus(outcome)))
		if outcome != event.RunCompleted {
			r.span.SetStatus(codes.Error, runStatus(outcome))
		}
	}
	r.span.End(trace.WithTimestamp(now))
}

// Observe builds spans from a batch of the session's committed events, in
// commit order. Events of runs s does not trace are ignored. It never
// blocks on I/O: the spans go to the provider's processor.
func (s *Session) Observe(batch []event.Event) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.runs) == 0 {
		return
	}
	for i := range batch {
		e := &batch[i]
		if e.RunID == "" {
			continue
		}
		r := s.runs[e.RunID]
		if r == nil {
			continue
		}
		if s.observe(r, e) {
			delete(s.runs, e.RunID)
		}
	}
}

// observe folds e into r's spans and reports whether it ended the run's.
func (s *Session) observe(r *run, e *event.Event) (ended bool) {
	seq := attribute.Int64("weft.seq", e.Seq)
	switch e.Type {
	case event.RunStarted:
		r.span.SetAttributes(seq)
	case event.MessageUser:
		if s.t.content {
			var d event.MessageUserData
			if e.Decode(&d) == nil {
				r.span.SetAttributes(attribute.String("gen_ai.input.messages", messages("user", partsText(d.Content))))
			}
		}
	case event.StepStarted:
		var d event.StepData
		if e.Decode(&d) != nil {
			return false
		}
		r.endStep(e.Time)
		step := attribute.Int("weft.step", d.Step)
		r.stepCtx, r.step = s.t.tracer.Start(r.ctx, "step", trace.WithTimestamp(e.Time),
			trace.WithAttributes(s.ids(), seq, step))
		provider, name := splitModel(r.model)
		_, r.call = s.t.tracer.Start(r.stepCtx, "chat "+name, trace.WithTimestamp(e.Time), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(s.ids(), seq, step,
				attribute.String("gen_ai.operation.name", "chat"),
				attribute.String("gen_ai.provider.name", provider),
				attribute.String("gen_ai.system", provider),
				attribute.String("gen_ai.request.model", name),
				attribute.String("gen_ai.conversation.id", s.id),
			))
	case event.ModelRetry:
		if r.call == nil {
			return false
		}
		var d event.ModelRetryData
		if e.Decode(&d) == nil {
			r.call.AddEvent("retry", trace.WithTimestamp(e.Time), trace.WithAttributes(seq,
				attribute.Int("weft.attempt", d.Attempt), attribute.Int64("weft.delay_ms", d.DelayMs),
				attribute.String("error.message", d.Error)))
		}
	case event.MessageCompleted:
		if r.call == nil {
			return false
		}
		// Without content, only what the span shows is decoded: the
		// text and the calls' arguments are not copied.
		var d struct {
			Text         string     `json:"text"`
			ToolCalls    []struct{} `json:"toolCalls"`
			FinishReason string     `json:"finishReason"`
		}
		var err error
		if s.t.content {
			err = e.Decode(&d)
		} else {
			var light struct {
				ToolCalls    []struct{} `json:"toolCalls"`
				FinishReason string     `json:"finishReason"`
			}
			err = e.Decode(&light)
			d.ToolCalls, d.FinishReason = light.ToolCalls, light.FinishReason
		}
		if err != nil {
			return false
		}
		attrs := []attribute.KeyValue{attribute.Int("weft.tool_calls", len(d.ToolCalls)), attribute.Int64("weft.end_seq", e.Seq)}
		if d.FinishReason != "" {
			attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{d.FinishReason}))
		}
		if s.t.content {
			attrs = append(attrs, attribute.String("gen_ai.output.messages", messages("assistant", d.Text)))
		}
		r.call.SetAttributes(attrs...)
	case event.Usage:
		if r.call == nil {
			return false
		}
		var d event.UsageData
		if e.Decode(&d) != nil {
			return false
		}
		u := d.Usage
		attrs := []attribute.KeyValue{
			attribute.Int64("gen_ai.usage.input_tokens", u.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", u.OutputTokens),
		}
		if u.CacheReadTokens > 0 {
			attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.CacheReadTokens))
		}
		if u.CacheWriteTokens > 0 {
			attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_creation.input_tokens", u.CacheWriteTokens))
		}
		if u.ReasoningTokens > 0 {
			attrs = append(attrs, attribute.Int64("weft.usage.reasoning_tokens", u.ReasoningTokens))
		}
		if u.CostUSD > 0 {
			attrs = append(attrs, attribute.Float64("weft.usage.cost_usd", u.CostUSD))
		}
		r.call.SetAttributes(attrs...)
		r.call.End(trace.WithTimestamp(e.Time))
		r.call = nil
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		if e.Decode(&d) != nil {
			return false
		}
		parent := r.stepCtx
		if parent == nil {
			parent = r.ctx
		}
		attrs := []attribute.KeyValue{s.ids(), seq, attribute.Int("weft.step", d.Step),
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", d.Name),
			attribute.String("gen_ai.tool.call.id", d.ID),
		}
		if s.t.content {
			attrs = append(attrs, attribute.String("gen_ai.tool.call.arguments", cut(d.Arguments)))
		}
		_, span := s.t.tracer.Start(parent, "execute_tool "+d.Name, trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
		if r.tools == nil {
			r.tools = map[string]trace.Span{}
		}
		r.tools[d.ID] = span
	case event.ToolCallCompleted:
		var d struct {
			ID      string             `json:"id"`
			IsError bool               `json:"isError"`
			Failure *event.ToolFailure `json:"failure"`
			Output  string             `json:"-"`
		}
		if s.t.content {
			var full event.ToolCallCompletedData
			if e.Decode(&full) != nil {
				return false
			}
			d.ID, d.IsError, d.Failure, d.Output = full.ID, full.IsError, full.Failure, full.Output
		} else if e.Decode(&d) != nil {
			return false
		}
		span := r.tools[d.ID]
		if span == nil {
			return false
		}
		delete(r.tools, d.ID)
		attrs := []attribute.KeyValue{attribute.Int64("weft.end_seq", e.Seq), attribute.Bool("weft.tool.error", d.IsError)}
		if s.t.content {
			attrs = append(attrs, attribute.String("gen_ai.tool.call.result", cut(d.Output)))
		}
		if d.Failure != nil {
			attrs = append(attrs, attribute.String("error.type", d.Failure.Kind))
		}
		span.SetAttributes(attrs...)
		if d.IsError {
			span.SetStatus(codes.Error, "the tool call failed")
		}
		span.End(trace.WithTimestamp(e.Time))
	case event.ApprovalRequested, event.InputRequested, event.ToolCallRequested:
		r.span.AddEvent(string(e.Type), trace.WithTimestamp(e.Time), trace.WithAttributes(seq))
	default:
		if !event.IsTerminalRun(e.Type) {
			return false
		}
		var d event.RunEndedData
		_ = e.Decode(&d)
		r.endStep(e.Time)
		status := runStatus(e.Type)
		attrs := []attribute.KeyValue{attribute.Int64("weft.end_seq", e.Seq), attribute.String("weft.run.status", status),
			attribute.Int("weft.steps", d.Steps),
			attribute.Int64("gen_ai.usage.input_tokens", d.Usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", d.Usage.OutputTokens),
		}
		if d.Error != nil {
			attrs = append(attrs, attribute.String("error.type", d.Error.Kind))
		}
		r.span.SetAttributes(attrs...)
		if e.Type != event.RunCompleted {
			r.span.SetStatus(codes.Error, status)
		}
		r.span.End(trace.WithTimestamp(e.Time))
		return true
	}
	return false
}

// ids is the session attribute every span below a run's carries (the run
// span carries the run's ID).
func (s *Session) ids() attribute.KeyValue {
	return attribute.String("weft.session.id", s.id)
}

// endStep ends the open model call, tool calls and step at t.
func (r *run) endStep(t time.Time) {
	if r.call != nil {
		r.call.End(trace.WithTimestamp(t))
		r.call = nil
	}
	for id, span := range r.tools {
		span.SetStatus(codes.Error, "the run ended before the call completed")
		span.End(trace.WithTimestamp(t))
		delete(r.tools, id)
	}
	if r.step != nil {
		r.step.End(trace.WithTimestamp(t))
		r.step, r.stepCtx = nil, nil
	}
}

// runStatus is the status a terminal event type gives a run.
func runStatus(t event.Type) string {
	return strings.TrimPrefix(string(t), "run.")
}

// splitModel splits "provider:model"; a name without a provider is the
// model's.
func splitModel(m string) (provider, name string) {
	if p, n, ok := strings.Cut(m, ":"); ok {
		return p, n
	}
	return "", m
}

// partsText is the text of parts, joined by newlines.
func partsText(ps []event.Part) string {
	var b strings.Builder
	for _, p := range ps {
		if p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// messages is one message of role with text, as the GenAI semantic
// conventions spell gen_ai.input.messages and gen_ai.output.messages.
func messages(role, text string) string {
	var b strings.Builder
	b.WriteString(`[{"role":`)
	b.Write(jsonString(role))
	b.WriteString(`,"parts":[{"type":"text","content":`)
	b.Write(jsonString(cut(text)))
	b.WriteString(`}]}]`)
	return b.String()
}

// jsonString is s as a JSON string.
func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// cut bounds s to maxContent bytes at a rune boundary.
func cut(s string) string {
	if len(s) <= maxContent {
		return s
	}
	n := maxContent
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…[cut]"
}
