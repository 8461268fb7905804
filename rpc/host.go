package rpc

import (
	"context"
	"errors"
	"sync"

	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/ids"
	"weft.dev/weft/internal/journal"
	"weft.dev/weft/tool"
)

// Subscription notifications.
const (
	// MethodEvent carries one event of a subscription: [EventNotification].
	MethodEvent = "events/event"
	// MethodClosed ends a subscription: [ClosedNotification].
	MethodClosed = "events/closed"
)

// SubscribeParams are the params of events/subscribe.
type SubscribeParams struct {
	SessionID string `json:"sessionId"`
	// After is the cursor: the first event delivered is After+1.
	After int64 `json:"after,omitempty"`
	// RunID, if set, keeps only that run's events.
	RunID string `json:"runId,omitempty"`
}

// SubscribeResult names a subscription.
type SubscribeResult struct {
	SubscriptionID string `json:"subscriptionId"`
}

// UnsubscribeParams are the params of events/unsubscribe.
type UnsubscribeParams struct {
	SubscriptionID string `json:"subscriptionId"`
}

// UnsubscribeResult acknowledges events/unsubscribe.
type UnsubscribeResult struct {
	Unsubscribed bool `json:"unsubscribed"`
}

// EventNotification is the params of events/event.
type EventNotification struct {
	SubscriptionID string      `json:"subscriptionId"`
	Event          event.Event `json:"event"`
}

// Reasons a subscription ends.
const (
	ReasonOverflow     = "overflow"
	ReasonClosed       = "closed"
	ReasonUnsubscribed = "unsubscribed"
	ReasonError        = "error"
)

// ClosedNotification is the params of events/closed: the subscription
// ended; a client resumes with events/subscribe after Cursor.
type ClosedNotification struct {
	SubscriptionID string `json:"subscriptionId"`
	Reason         string `json:"reason"`
	// Cursor is the seq of the last event delivered (or the subscription's
	// starting cursor).
	Cursor  int64  `json:"cursor"`
	Message string `json:"message,omitempty"`
}

// ToolsListParams are the params of tools/list.
type ToolsListParams struct{}

// ToolsListResult lists the tools runs are offered.
type ToolsListResult struct {
	Tools []tool.Spec `json:"tools"`
}

// HostConfig configures [NewHostServer].
type HostConfig struct {
	Config
	// Tools, if set, is listed by tools/list.
	Tools *tool.Registry
}

// NewHostServer returns a server with the whole host method table
// registered on it, and every event type described for rpc.discover.
func NewHostServer(h *host.Host, cfg HostConfig) *Server {
	next := cfg.MapError
	cfg.MapError = func(err error) *Error {
		if e := MapHostError(err); e != nil {
			return e
		}
		if next != nil {
			return next(err)
		}
		return nil
	}
	s := NewServer(cfg.Config)
	m := &hostMethods{h: h, subs: map[string]*subscription{}}
	Register(s, "session/create", "Create a session with its mounts.", func(ctx context.Context, p *host.CreateSessionParams) (*host.SessionResult, error) {
		return h.CreateSession(context.WithoutCancel(ctx), *p)
	})
	Register(s, "session/get", "Get a session.", func(ctx context.Context, p *SessionGetParams) (*host.SessionResult, error) {
		return h.GetSession(ctx, p.SessionID)
	})
	Register(s, "session/list", "List sessions, newest first.", func(ctx context.Context, p *host.ListSessionsParams) (*host.ListSessionsResult, error) {
		return h.ListSessions(ctx, *p)
	})
	Register(s, "session/delete", "Delete a session without an active run.", func(ctx context.Context, p *host.SessionIDParams) (*host.DeleteResult, error) {
		return h.DeleteSession(context.WithoutCancel(ctx), *p)
	})
	Register(s, "run/start", "Start a run; busy decides what happens when one is active.", func(ctx context.Context, p *host.StartRunParams) (*host.RunResult, error) {
		return h.StartRun(context.WithoutCancel(ctx), *p)
	})
	Register(s, "run/get", "Get a run.", func(ctx context.Context, p *host.RunIDParams) (*host.RunResult, error) {
		return h.GetRun(ctx, *p)
	})
	Register(s, "run/list", "List a session's runs.", func(ctx context.Context, p *host.ListRunsParams) (*host.ListRunsResult, error) {
		return h.ListRuns(ctx, *p)
	})
	Register(s, "run/wait", "Wait for a run's terminal event or the timeout.", func(ctx context.Context, p *host.WaitRunParams) (*host.WaitRunResult, error) {
		return h.WaitRun(ctx, *p)
	})
	Register(s, "run/steer", "Inject input into the active run.", func(ctx context.Context, p *host.SteerParams) (*host.SteerReceipt, error) {
		return h.SteerRun(context.WithoutCancel(ctx), *p)
	})
	Register(s, "run/cancel", "Cancel a run; returns once run.cancelled is committed.", func(ctx context.Context, p *host.CancelParams) (*host.RunResult, error) {
		return h.CancelRun(context.WithoutCancel(ctx), *p)
	})
	Register(s, host.MethodEnvList, "List a session's mounts and binding version.", func(ctx context.Context, p *host.ListEnvParams) (*host.ListEnvResult, error) {
		return h.ListEnv(ctx, *p)
	})
	Register(s, host.MethodEnvMount, "Attach (or with replace, replace) a mount; the active run's next tool call sees it.", func(ctx context.Context, p *host.MountParams) (*host.MountResult, error) {
		return h.Mount(context.WithoutCancel(ctx), *p)
	})
	Register(s, host.MethodEnvUnmount, "Detach a mount; refused while it owns a running process.", func(ctx context.Context, p *host.UnmountParams) (*host.MountResult, error) {
		return h.Unmount(context.WithoutCancel(ctx), *p)
	})
	Register(s, "events/read", "Read a page of a session's events after a cursor.", func(ctx context.Context, p *host.ReadEventsParams) (*host.ReadEventsResult, error) {
		return h.ReadEvents(ctx, *p)
	})
	Register(s, "events/subscribe", "Subscribe to a session's events after a cursor: replay, then live (WebSocket and stdio).", m.subscribe)
	Register(s, "events/unsubscribe", "End a subscription.", m.unsubscribe)
	Register(s, "tools/list", "List the tools runs are offered.", func(ctx context.Context, p *ToolsListParams) (*ToolsListResult, error) {
		res := &ToolsListResult{Tools: []tool.Spec{}}
		if cfg.Tools != nil {
			res.Tools = cfg.Tools.Specs()
		}
		return res, nil
	})
	registerEvents(s)
	RegisterEventType[EventNotification](s, MethodEvent, "Notification: one event of a subscription.")
	RegisterEventType[ClosedNotification](s, MethodClosed, "Notification: a subscription ended; resume after cursor.")
	return s
}

// SessionGetParams are the params of session/get.
type SessionGetParams struct {
	SessionID string `json:"sessionId"`
}

// MapHostError maps the host's errors to wire errors, or returns nil.
func MapHostError(err error) *Error {
	table := []struct {
		sentinel error
		kind     Kind
	}{
		{host.ErrNotFound, KindNotFound},
		{host.ErrAlreadyExists, KindAlreadyExists},
		{host.ErrInvalidParams, KindInvalidParams},
		{host.ErrIdempotencyConflict, KindIdempotencyConflict},
		{host.ErrRunConflict, KindRunConflict},
		{host.ErrCursorInvalid, KindCursorInvalid},
		{host.ErrEnvUnavailable, KindEnvironmentUnavailable},
		{host.ErrOverloaded, KindOverloaded},
		{host.ErrClosed, KindOverloaded},
	}
	for _, t := range table {
		if !errors.Is(err, t.sentinel) {
			continue
		}
		e := NewError(t.kind, err.Error())
		var he *host.Error
		if errors.As(err, &he) {
			for k, v := range he.Data {
				e = e.With(k, v)
			}
		}
		return e
	}
	return nil
}

// hostMethods holds the subscriptions of every connection.
type hostMethods struct {
	h    *host.Host
	mu   sync.Mutex
	subs map[string]*subscription
}

type subscription struct {
	conn   *Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	reason string // set by unsubscribe before cancel
}

func (m *hostMethods) subscribe(ctx context.Context, p *SubscribeParams) (*SubscribeResult, error) {
	conn := ConnFrom(ctx)
	if conn == nil || conn.Transport() == "http" {
		return nil, NewError(KindInvalidRequest, "events/subscribe needs a WebSocket or stdio connection; over plain HTTP use events/read or the SSE endpoint GET /v1/sessions/{id}/events")
	}
	subCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	seq, err := m.h.Subscribe(subCtx, p.SessionID, p.After, p.RunID)
	if err != nil {
		cancel()
		return nil, err
	}
	id := ids.New("sub")
	sub := &subscription{conn: conn, cancel: cancel}
	m.mu.Lock()
	m.subs[id] = sub
	m.mu.Unlock()
	conn.OnClose(func() {
		cancel()
		sub.wg.Wait()
	})
	sub.wg.Add(1)
	run := func() {
		defer sub.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.subs, id)
			m.mu.Unlock()
			cancel()
		}()
		cursor := p.After
		closed := ClosedNotification{SubscriptionID: id, Reason: ReasonClosed}
		for e, err := range seq {
			if err != nil {
				switch {
				case errors.Is(err, journal.ErrLagged):
					closed.Reason, closed.Message = ReasonOverflow, "the subscriber fell behind; resume after the cursor"
				case subCtx.Err() != nil:
					m.mu.Lock()
					closed.Reason = sub.reason
					m.mu.Unlock()
					if closed.Reason == "" {
						return // the connection closed: nobody to tell
					}
				case errors.Is(err, journal.ErrClosed):
					closed.Reason, closed.Message = ReasonClosed, "the host is shutting down"
				default:
					closed.Reason, closed.Message = ReasonError, err.Error()
				}
				break
			}
			if err := conn.NotifyWait(subCtx, MethodEvent, EventNotification{SubscriptionID: id, Event: e}); err != nil {
				return
			}
			cursor = e.Seq
		}
		closed.Cursor = cursor
		_ = conn.NotifyWait(context.WithoutCancel(subCtx), MethodClosed, closed)
	}
	if !AfterReply(ctx, func() { go run() }) {
		go run()
	}
	return &SubscribeResult{SubscriptionID: id}, nil
}

func (m *hostMethods) unsubscribe(ctx context.Context, p *UnsubscribeParams) (*UnsubscribeResult, error) {
	m.mu.Lock()
	sub, ok := m.subs[p.SubscriptionID]
	if ok && sub.conn != ConnFrom(ctx) {
		ok = false // another connection's subscription: do not leak it
	}
	if ok {
		sub.reason = ReasonUnsubscribed
	}
	m.mu.Unlock()
	if !ok {
		return nil, Errorf(KindNotFound, "subscription %s not found", p.SubscriptionID)
	}
	sub.cancel()
	sub.wg.Wait()
	return &UnsubscribeResult{Unsubscribed: true}, nil
}

// registerEvents describes every event type for rpc.discover.
func registerEvents(s *Server) {
	RegisterEventType[event.SessionCreatedData](s, string(event.SessionCreated), "The first event of every session.")
	RegisterEventType[event.SessionUpdatedData](s, string(event.SessionUpdated), "A change of title or model.")
	RegisterEventType[struct{}](s, string(event.SessionDeleted), "The session was deleted.")
	RegisterEventType[event.RunQueuedData](s, string(event.RunQueued), "A run was admitted.")
	RegisterEventType[event.RunStartedData](s, string(event.RunStarted), "A run began executing.")
	RegisterEventType[event.RunEndedData](s, string(event.RunCompleted), "A run reached a final answer.")
	RegisterEventType[event.RunEndedData](s, string(event.RunFailed), "A run failed; error says why.")
	RegisterEventType[event.RunEndedData](s, string(event.RunCancelled), "A run was cancelled.")
	RegisterEventType[event.RunEndedData](s, string(event.RunInterrupted), "A run found active after a crash was closed.")
	RegisterEventType[event.MessageUserData](s, string(event.MessageUser), "The user input that starts a run.")
	RegisterEventType[event.DeltaData](s, string(event.MessageDelta), "Streamed assistant text, coalesced.")
	RegisterEventType[event.DeltaData](s, string(event.ReasoningDelta), "Streamed reasoning text, coalesced.")
	RegisterEventType[event.MessageCompletedData](s, string(event.MessageCompleted), "One step's assistant message, whole.")
	RegisterEventType[event.StepData](s, string(event.StepStarted), "A model call began.")
	RegisterEventType[event.ToolCallStartedData](s, string(event.ToolCallStarted), "A tool call the model asked for.")
	RegisterEventType[event.ToolCallCompletedData](s, string(event.ToolCallCompleted), "A tool call's result.")
	RegisterEventType[event.UsageData](s, string(event.Usage), "Tokens of one step.")
	RegisterEventType[event.ModelRetryData](s, string(event.ModelRetry), "A model request is retried.")
	RegisterEventType[event.SteerData](s, string(event.SteerAccepted), "Input injected into the active run.")
	RegisterEventType[event.SteerData](s, string(event.SteerConsumed), "The model saw a steer.")
	RegisterEventType[event.SteerData](s, string(event.SteerDropped), "A steer the run ended before consuming.")
	RegisterEventType[event.MountChangeData](s, string(event.MountAdded), "A mount was attached.")
	RegisterEventType[event.MountChangeData](s, string(event.MountRemoved), "A mount was detached.")
	RegisterEventType[event.Binding](s, string(event.MountInfo), "The session's mounts at the start of a run.")
}
