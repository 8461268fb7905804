package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm"
	"weft.dev/weft/tool"
)

// model is the simulated model. Every session of the simulation has a
// model name of its own ("sim:<k>", k the session's index), so that a
// model call knows its session without looking at the request; a call
// registers itself as an open stream and yields what the driver queues,
// one step at a time. It also checks what it is asked: one call at a
// time per session, and a transcript whose tool calls are each answered
// exactly once.
type model struct {
	mu       sync.Mutex
	open     map[int]*stream // by session index
	problems []string        // invariants the requests broke
	calls    int             // model calls, for the summary
}

// stream is one open model call.
type stream struct {
	k    int
	wake chan struct{} // cap 1: chunks were queued

	mu    sync.Mutex
	queue []chunk

	// plan is the rest of the response; only the driver touches it.
	plan    []chunk
	planned bool
}

// chunk is one item of a response: a stream event, an error, or the end
// of a stream that never says it finished (quiet).
type chunk struct {
	ev    llm.StreamEvent
	err   error
	quiet bool
}

func newModel() *model { return &model{open: map[int]*stream{}} }

// resolve is the host's ResolveModel: "sim:<k>".
func (m *model) resolve(name string) (*host.Model, error) {
	s, ok := strings.CutPrefix(name, "sim:")
	k, err := strconv.Atoi(s)
	if !ok || err != nil || k < 0 {
		return nil, api.Errorf(api.KindInvalidParams, "model %q: the simulation has only sim:<n>", name)
	}
	return &host.Model{Name: name, Provider: provider{m: m, k: k}, Model: "sim"}, nil
}

// provider is session k's model.
type provider struct {
	m *model
	k int
}

func (p provider) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.StreamEvent, error] {
	return func(yield func(llm.StreamEvent, error) bool) {
		st := p.m.begin(p.k, req)
		defer p.m.end(st)
		for {
			c, ok := st.next(ctx)
			if !ok {
				yield(llm.StreamEvent{}, ctx.Err())
				return
			}
			switch {
			case c.quiet:
				return
			case c.err != nil:
				yield(llm.StreamEvent{}, c.err)
				return
			}
			if !yield(c.ev, nil) || c.ev.Finish != nil {
				return
			}
		}
	}
}

// begin opens session k's stream, checking the request.
func (m *model) begin(k int, req *llm.Request) *stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if _, ok := m.open[k]; ok {
		m.problems = append(m.problems, fmt.Sprintf("session %d: two model calls at once (two runs active)", k))
	}
	if p := checkTranscript(req.Messages); p != "" {
		m.problems = append(m.problems, fmt.Sprintf("session %d: the model was sent a broken transcript: %s", k, p))
	}
	st := &stream{k: k, wake: make(chan struct{}, 1)}
	m.open[k] = st
	return st
}

// end closes st.
func (m *model) end(st *stream) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open[st.k] == st {
		delete(m.open, st.k)
	}
}

// next returns the next queued chunk, waiting for one; false when ctx ends.
func (st *stream) next(ctx context.Context) (chunk, bool) {
	for {
		st.mu.Lock()
		if len(st.queue) > 0 {
			c := st.queue[0]
			st.queue = st.queue[1:]
			st.mu.Unlock()
			return c, true
		}
		st.mu.Unlock()
		select {
		case <-st.wake:
		case <-ctx.Done():
			return chunk{}, false
		}
	}
}

// send queues cs for the stream's goroutine.
func (st *stream) send(cs ...chunk) {
	st.mu.Lock()
	st.queue = append(st.queue, cs...)
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// streams returns the open streams by session index.
func (m *model) streams() []*stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*stream, 0, len(m.open))
	for _, st := range m.open {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *stream) int { return a.k - b.k })
	return out
}

// streaming reports whether session k has a model call open.
func (m *model) streaming(k int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.open[k]
	return ok
}

// takeProblems returns what the requests broke since the last call.
func (m *model) takeProblems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.problems
	m.problems = nil
	return p
}

// checkTranscript says what is wrong with msgs, if anything: a tool call
// ID used twice, or an assistant message's calls not answered exactly
// once, right after it, in its order.
func checkTranscript(msgs []llm.Message) string {
	seen := map[string]bool{}
	for i, m := range msgs {
		if m.Role == llm.RoleTool {
			if !seen[m.ToolCallID] {
				return fmt.Sprintf("message %d answers tool call %s, which no assistant message asked for before", i, m.ToolCallID)
			}
			continue
		}
		for j, c := range m.ToolCalls {
			if seen[c.ID] {
				return fmt.Sprintf("tool call %s is asked for twice", c.ID)
			}
			seen[c.ID] = true
			k := i + 1 + j
			if k >= len(msgs) || msgs[k].Role != llm.RoleTool || msgs[k].ToolCallID != c.ID {
				return fmt.Sprintf("tool call %s (message %d) is not answered right after it, in order", c.ID, i)
			}
		}
	}
	return ""
}

// The tools of the simulation. The host's policy allows work, asks
// about ask (and about asked, with a deadline that allows), and denies
// denied; session tool client_op is executed by the client, ask_user by
// the user.
const (
	toolWork     = "work"
	toolAsk      = "ask"
	toolAskTimed = "ask_timed"
	toolDenied   = "denied"
	toolClient   = "client_op"
	toolUnknown  = "no_such_tool"
)

// askTimeout is the deadline of ask_timed's approvals and of questions.
const askTimeout = 90 * time.Second

// policy is the host's approval policy.
func policy() api.Policy {
	return api.Policy{Rules: []api.Rule{
		{Tool: toolWork, Action: api.ActionAllow},
		{Tool: toolAsk, Action: api.ActionAsk, Reason: "sim: ask first"},
		{Tool: toolAskTimed, Action: api.ActionAsk, Reason: "sim: ask, allow at the deadline", TimeoutMs: askTimeout.Milliseconds(),
			Default: api.ActionAllow},
		{Tool: toolDenied, Action: api.ActionDeny, Reason: "sim: never"},
	}}
}

// clientTools are the tools every session's client declares.
var clientTools = []api.ToolSpec{{Name: toolClient, Description: "a tool the client runs",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}}

// tools are the simulation's in-memory tools. A call waits until the
// driver ends it; a cancelled call takes a moment of its own to stop
// (fake time, distinct per call), so that the calls of one step that are
// cancelled together end in an order the seed fixes. Every execution is
// recorded, across hosts: a gated call must run at most once.
type tools struct {
	mu       sync.Mutex
	inflight map[string]*toolCall // by call ID
	ran      map[string]int       // call ID → executions
	order    []string             // call IDs in the order they ran
}

// toolCall is one executing call.
type toolCall struct {
	id, session, run string
	n                int              // the call's number (from its ID)
	end              chan tool.Result // the driver's result
	stopping         bool             // cancelled, stopping
}

func newTools() *tools {
	return &tools{inflight: map[string]*toolCall{}, ran: map[string]int{}}
}

type toolArgs struct {
	N int `json:"n"`
}

// registry returns the registry of the host's tools.
func (ts *tools) registry() (*tool.Registry, error) {
	reg := tool.NewRegistry()
	for _, name := range []string{toolWork, toolAsk, toolAskTimed, toolDenied} {
		t, err := tool.Func(name, "a simulated tool", ts.call)
		if err != nil {
			return nil, err
		}
		if err := reg.Add(t); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// call is every tool's function.
func (ts *tools) call(ctx context.Context, c *tool.Call, _ toolArgs) (tool.Result, error) {
	n, _ := strconv.Atoi(strings.TrimPrefix(c.ID, "call"))
	tc := &toolCall{id: c.ID, session: c.SessionID, run: c.RunID, n: n, end: make(chan tool.Result, 1)}
	ts.mu.Lock()
	ts.ran[c.ID]++
	ts.order = append(ts.order, c.ID)
	ts.inflight[c.ID] = tc
	ts.mu.Unlock()
	defer func() {
		ts.mu.Lock()
		delete(ts.inflight, c.ID)
		ts.mu.Unlock()
	}()
	select {
	case r := <-tc.end:
		return r, nil
	case <-ctx.Done():
		ts.mu.Lock()
		tc.stopping = true
		ts.mu.Unlock()
		time.Sleep(time.Duration(n%997+1) * time.Microsecond)
		return tool.Result{}, ctx.Err()
	}
}

// pending returns the calls the driver may end, by call number.
func (ts *tools) pending() []*toolCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []*toolCall
	for _, tc := range ts.inflight {
		if !tc.stopping {
			out = append(out, tc)
		}
	}
	slices.SortFunc(out, func(a, b *toolCall) int { return a.n - b.n })
	return out
}

// busy reports whether run has a call executing (or stopping).
func (ts *tools) busy(run string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, tc := range ts.inflight {
		if tc.run == run {
			return true
		}
	}
	return false
}

// executing returns how many calls are executing or stopping.
func (ts *tools) executing() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.inflight)
}

// runs returns how many times call id ran.
func (ts *tools) runs(id string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.ran[id]
}

// since returns the calls that ran after the first n, and the new n.
func (ts *tools) since(n int) ([]string, int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.order[n:]), len(ts.order)
}

// callArgs encodes a call's arguments.
func callArgs(n int) string { return fmt.Sprintf(`{"n":%d}`, n) }

// stepCall is a tool call of a planned step.
type stepCall struct {
	name, args string
}

// toolCallChunks splits a call into one or two fragments.
func toolCallChunks(index int, id string, c stepCall, split bool) []chunk {
	if !split || len(c.args) < 2 {
		return []chunk{{ev: llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: index, ID: id, Name: c.name, Arguments: c.args}}}}
	}
	cut := len(c.args) / 2
	return []chunk{
		{ev: llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: index, ID: id, Name: c.name, Arguments: c.args[:cut]}}},
		{ev: llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: index, Arguments: c.args[cut:]}}},
	}
}

// usage is a step's token count.
func usage(in, out int64) chunk {
	return chunk{ev: llm.StreamEvent{Usage: &event.TokenUsage{InputTokens: in, OutputTokens: out}}}
}
