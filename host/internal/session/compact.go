package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/idem"
	"weft.dev/weft/llm"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// maxStateProcesses and maxStateBytes bound the state a compaction
// re-injects: the model is told how many processes were left out.
const (
	maxStateProcesses = 50
	maxStateBytes     = 16 << 10
)

// compactionState describes what must stay reachable across a
// compaction, as text for the model: the mounts, the live processes the
// session owns or was granted, with their handles and status, and the
// open requests to people and clients. It reads the store's process
// records and the journal's projection; no session lock is needed.
func (s *Session) compactionState(ctx context.Context) string {
	var sb strings.Builder
	sb.WriteString("Current state, re-injected after the compaction (every handle below is still valid):\n")
	sb.WriteString("Mounts:")
	if b := s.currentBinding(); b != nil && len(b.Mounts()) > 0 {
		for _, m := range b.Mounts() {
			fmt.Fprintf(&sb, "\n- /environment/%s (%s", m.ID, m.Mode)
			if m.Default {
				sb.WriteString(", default")
			}
			if m.DefaultForShell {
				sb.WriteString(", shell default")
			}
			sb.WriteString(")")
		}
	} else {
		sb.WriteString(" none")
	}
	sb.WriteString("\nLive background processes:")
	procs, err := s.cfg.Store.Processes(ctx, store.ListProcessesParams{SessionID: s.id, IncludeGranted: true,
		Statuses: []string{record.ProcessRunning}, Limit: maxStateProcesses + 1})
	switch {
	case err != nil:
		fmt.Fprintf(&sb, " unknown (they could not be listed: %v); call process_list", err)
	case len(procs) == 0:
		sb.WriteString(" none")
	}
	for i, p := range procs {
		if i == maxStateProcesses {
			sb.WriteString("\n- … and more: call the process list tool for the rest")
			break
		}
		h, _ := json.Marshal(api.Handle{ID: p.ID})
		what := p.Spec.Command
		if p.Kind == record.ProcessTool {
			what = "tool " + p.Spec.Tool
		}
		if len(what) > 200 {
			what = what[:200] + "…"
		}
		fmt.Fprintf(&sb, "\n- %s: %s, %s, %d bytes of output so far; handle %s", p.ID, p.Status, what, p.OutputBytes, h)
	}
	sb.WriteString("\nOpen requests:")
	open := s.j.OpenRequests()
	if len(open) == 0 {
		sb.WriteString(" none")
	}
	for _, q := range open {
		fmt.Fprintf(&sb, "\n- %s: %s for call %s (%s), %s", q.ID, q.Kind, q.ToolCall.ID, q.ToolCall.Name, q.Status)
		if sb.Len() > maxStateBytes {
			break
		}
	}
	out := sb.String()
	if len(out) > maxStateBytes {
		out = out[:maxStateBytes] + "\n[… cut at the size cap]"
	}
	return out
}

// compactModel returns the model that writes m's summaries: the one
// m.CompactModel names, or m.
func (s *Session) compactModel(m *agent.Model) (*agent.Model, error) {
	if m.CompactModel == "" || m.CompactModel == m.Name {
		return nil, nil
	}
	cm, err := s.cfg.ResolveModel(m.CompactModel)
	if err != nil {
		return nil, fmt.Errorf("compactModel %s of model %s: %w", m.CompactModel, m.Name, err)
	}
	return cm, nil
}

// Compact compacts the session's conversation now, as the loop does
// before a step (session/compact): its model summarises the transcript
// and context.compacted is committed with rc's receipt. It is refused
// with a run conflict while a run is active, parked or queued (the loop
// compacts a running run itself, between its steps) and while another
// compaction runs; a run started meanwhile waits in the queue until the
// compaction ends. A session without a conversation is invalid params.
func (s *Session) Compact(ctx context.Context, p api.CompactParams, rc *idem.Claim) (*api.CompactResult, error) {
	err := s.command(func() error {
		if id, _ := s.busyWith(); id != "" || s.active != nil {
			if id == "" {
				id = s.active.id
			}
			return api.Errorf(api.KindRunConflict, "session %s is busy with run %s: it compacts between its steps when it needs to; compact once it has ended", s.id, id).
				With("sessionId", s.id).With("activeRunId", id)
		}
		if s.compacting {
			return api.Errorf(api.KindRunConflict, "session %s is already being compacted", s.id).With("sessionId", s.id)
		}
		s.compacting = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.compacting = false
		if s.active == nil {
			s.startNext()
		}
	}()
	upTo := s.j.LastSeq()
	hist, basis, err := s.conv.Messages(ctx, sessionLog{s})
	if err != nil {
		return nil, err
	}
	if len(hist) == 0 {
		return nil, api.Errorf(api.KindInvalidParams, "session %s has no conversation to compact", s.id).With("sessionId", s.id)
	}
	name := s.Record().Model
	if name == "" {
		name = s.cfg.DefaultModel
	}
	m, err := s.cfg.ResolveModel(name)
	if err != nil {
		return nil, api.Wrap(api.KindInvalidParams, err, "session %s: model %s", s.id, name)
	}
	summarizer, err := s.compactModel(m)
	if err != nil {
		return nil, api.Wrap(api.KindInvalidParams, err, "session %s", s.id)
	}
	if summarizer == nil {
		summarizer = m
	}
	var tools []llm.ToolSpec
	if s.cfg.Tools != nil {
		for _, t := range s.cfg.Tools.Specs() {
			tools = append(tools, llm.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	d, err := agent.Compact(ctx, agent.CompactParams{Model: summarizer, History: hist, Tools: tools,
		State: s.compactionState(ctx), ContextWindow: m.ContextWindow})
	if err != nil {
		if le, ok := llm.AsError(err); ok {
			return nil, api.Wrap(api.KindInternal, le, "session %s: the model could not summarise the conversation", s.id).With("sessionId", s.id)
		}
		return nil, err
	}
	d.UpToSeq, d.Reason = upTo, event.CompactRequested
	d.TokensBefore = basis.Tokens + basis.Bytes/4
	for _, m := range agent.CompactedMessages(d) {
		d.TokensAfter += (int64(len(m.Content)) + 16 + 3) / 4
	}
	e, err := event.New("", event.ContextCompacted, d)
	if err != nil {
		return nil, err
	}
	res := &api.CompactResult{SessionID: s.id, UpToSeq: d.UpToSeq, TokensBefore: d.TokensBefore, TokensAfter: d.TokensAfter, Summary: d.Summary}
	err = s.command(func() error {
		ref := idem.Ref{ID: s.id}
		if rc != nil {
			// The seq is known only after the commit; the receipt keeps
			// what the replay needs without it.
			raw, _ := json.Marshal(res)
			ref.Result = raw
		}
		evs, err := s.append(ctx, rc, ref, e)
		if err != nil {
			return err
		}
		res.Seq = evs[0].Seq
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Transcript returns the session's conversation as session/get shows it
// (view compacted or full), keeping the newest messages within maxBytes.
func (s *Session) Transcript(ctx context.Context, view string, maxBytes int) (*api.Transcript, error) {
	evs, err := s.readAll(ctx, 0, agent.TranscriptTypes())
	if err != nil {
		return nil, err
	}
	return TranscriptView(evs, view, maxBytes)
}

// TranscriptView builds a session/get transcript view from a session's
// transcript events, keeping the newest messages within maxBytes of text.
func TranscriptView(evs []event.Event, view string, maxBytes int) (*api.Transcript, error) {
	var msgs []llm.Message
	var err error
	if view == api.TranscriptFull {
		msgs, err = agent.FullTranscript(evs)
	} else {
		msgs, err = agent.Transcript(evs)
	}
	if err != nil {
		return nil, err
	}
	t := &api.Transcript{View: view, Messages: []api.TranscriptMessage{}}
	for _, e := range evs {
		if e.Type == event.ContextCompacted {
			t.Compactions++
		}
	}
	start, used := len(msgs), 0
	for start > 0 {
		m := msgs[start-1]
		n := len(m.Content) + len(m.Reasoning) + 64
		for _, c := range m.ToolCalls {
			n += len(c.Arguments) + len(c.Name) + len(c.ID)
		}
		if used+n > maxBytes {
			break
		}
		used += n
		start--
	}
	t.Omitted = start
	for _, m := range msgs[start:] {
		t.Messages = append(t.Messages, api.TranscriptMessage{Role: string(m.Role), Content: m.Content, Reasoning: m.Reasoning,
			ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError})
	}
	return t, nil
}
