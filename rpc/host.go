package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/ids"
	"weft.dev/weft/internal/journal"
	"weft.dev/weft/internal/jsonrpc"
	"weft.dev/weft/process"
	"weft.dev/weft/tool"
)

// HostConfig configures [NewHostServer].
type HostConfig struct {
	Config
	// Tools, if set, is listed by tools/list.
	Tools *tool.Registry
}

// NewHostServer returns a server with the whole host method table
// registered on it, and every event type described for rpc.discover.
func NewHostServer(h *host.Host, cfg HostConfig) *Server {
	if cfg.TypeSchemas == nil {
		cfg.TypeSchemas = map[reflect.Type]*jsonschema.Schema{}
	}
	// Input is a string or a list of content parts.
	parts, err := jsonschema.For[[]event.Part](nil)
	if err != nil {
		panic(fmt.Sprintf("rpc: schema of input parts: %v", err))
	}
	cfg.TypeSchemas[reflect.TypeFor[api.Input]()] = &jsonschema.Schema{
		Description: "text, or a list of content parts",
		OneOf:       []*jsonschema.Schema{{Type: "string"}, parts},
	}
	s := NewServer(cfg.Config)
	m := &hostMethods{h: h, subs: map[string]*subscription{}}
	Register(s, "session/create", "Create a session with its mounts.", func(ctx context.Context, p *api.CreateSessionParams) (*api.SessionResult, error) {
		return h.CreateSession(context.WithoutCancel(ctx), *p)
	})
	Register(s, "session/get", "Get a session.", func(ctx context.Context, p *api.SessionGetParams) (*api.SessionResult, error) {
		return h.GetSession(ctx, p.SessionID)
	})
	Register(s, "session/list", "List sessions, newest first.", func(ctx context.Context, p *api.ListSessionsParams) (*api.ListSessionsResult, error) {
		return h.ListSessions(ctx, *p)
	})
	Register(s, "session/delete", "Delete a session without an active run.", func(ctx context.Context, p *api.SessionIDParams) (*api.DeleteResult, error) {
		return h.DeleteSession(context.WithoutCancel(ctx), *p)
	})
	Register(s, api.MethodSessionUpdate, "Change a session's title or model; fields left out stay as they are.", func(ctx context.Context, p *api.UpdateSessionParams) (*api.SessionResult, error) {
		return h.UpdateSession(context.WithoutCancel(ctx), *p)
	})
	Register(s, "run/start", "Start a run; busy decides what happens when one is active.", func(ctx context.Context, p *api.StartRunParams) (*api.RunResult, error) {
		return h.StartRun(context.WithoutCancel(ctx), *p)
	})
	Register(s, "run/get", "Get a run.", func(ctx context.Context, p *api.RunIDParams) (*api.RunResult, error) {
		return h.GetRun(ctx, *p)
	})
	Register(s, "run/list", "List a session's runs.", func(ctx context.Context, p *api.ListRunsParams) (*api.ListRunsResult, error) {
		return h.ListRuns(ctx, *p)
	})
	Register(s, "run/wait", "Wait for a run's terminal event or the timeout.", func(ctx context.Context, p *api.WaitRunParams) (*api.WaitRunResult, error) {
		return h.WaitRun(ctx, *p)
	})
	Register(s, "run/steer", "Inject input into the active run.", func(ctx context.Context, p *api.SteerParams) (*api.SteerReceipt, error) {
		return h.SteerRun(context.WithoutCancel(ctx), *p)
	})
	Register(s, "run/cancel", "Cancel a run; returns once run.cancelled is committed.", func(ctx context.Context, p *api.CancelParams) (*api.RunResult, error) {
		return h.CancelRun(context.WithoutCancel(ctx), *p)
	})
	Register(s, api.MethodEnvList, "List a session's mounts and binding version.", func(ctx context.Context, p *api.ListEnvParams) (*api.ListEnvResult, error) {
		return h.ListEnv(ctx, *p)
	})
	Register(s, api.MethodEnvMount, "Attach (or with replace, replace) a mount; the active run's next tool call sees it.", func(ctx context.Context, p *api.MountParams) (*api.MountResult, error) {
		return h.Mount(context.WithoutCancel(ctx), *p)
	})
	Register(s, api.MethodEnvUnmount, "Detach a mount; refused while it owns a running process.", func(ctx context.Context, p *api.UnmountParams) (*api.MountResult, error) {
		return h.Unmount(context.WithoutCancel(ctx), *p)
	})
	Register(s, "events/read", "Read a page of a session's events after a cursor.", func(ctx context.Context, p *api.ReadEventsParams) (*api.ReadEventsResult, error) {
		return h.ReadEvents(ctx, *p)
	})
	Register(s, "events/subscribe", "Subscribe to a session's events after a cursor: replay, then live (WebSocket and stdio).", m.subscribe)
	Register(s, "events/unsubscribe", "End a subscription.", m.unsubscribe)
	Register(s, "tools/list", "List the tools runs are offered.", func(ctx context.Context, p *api.ToolsListParams) (*api.ToolsListResult, error) {
		res := &api.ToolsListResult{Tools: []api.ToolSpec{}}
		if cfg.Tools != nil {
			for _, t := range cfg.Tools.Specs() {
				res.Tools = append(res.Tools, api.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
			}
		}
		return res, nil
	})
	Register(s, "process/start", "Start a shell command or a tool in the background; returns its handle at once.", func(ctx context.Context, p *api.ProcessStartParams) (*api.ProcessResult, error) {
		return h.StartProcess(context.WithoutCancel(ctx), *p)
	})
	Register(s, "process/get", "Get a process.", func(ctx context.Context, p *api.ProcessIDParams) (*api.ProcessResult, error) {
		return h.GetProcess(ctx, *p)
	})
	Register(s, "process/list", "List the processes a session owns or was granted.", func(ctx context.Context, p *api.ProcessListParams) (*api.ProcessListResult, error) {
		return h.ListProcesses(ctx, *p)
	})
	Register(s, "process/await", "Wait for a process to end, or the timeout.", func(ctx context.Context, p *api.ProcessAwaitParams) (*api.AwaitResult, error) {
		return h.AwaitProcess(ctx, *p)
	})
	Register(s, "process/output", "Read a process's output from a byte offset (data is base64).", func(ctx context.Context, p *api.ProcessOutputParams) (*api.Output, error) {
		return h.ProcessOutput(ctx, *p)
	})
	Register(s, "process/write", "Write to a process's stdin.", func(ctx context.Context, p *api.ProcessWriteParams) (*api.ProcessResult, error) {
		return h.WriteProcess(context.WithoutCancel(ctx), *p)
	})
	Register(s, "process/signal", "Append signal.<name> to the process log; interrupt, terminate, kill and hangup also reach a shell's process group.", func(ctx context.Context, p *api.ProcessSignalParams) (*api.ProcessSignalResult, error) {
		return h.SignalProcess(context.WithoutCancel(ctx), *p)
	})
	Register(s, "process/cancel", "Cancel a process through the cancel policy.", func(ctx context.Context, p *api.ProcessCancelParams) (*api.ProcessResult, error) {
		return h.CancelProcess(context.WithoutCancel(ctx), *p)
	})
	Register(s, "process/grant", "Let another session address a process.", func(ctx context.Context, p *api.ProcessGrantParams) (*api.ProcessResult, error) {
		return h.GrantProcess(context.WithoutCancel(ctx), *p)
	})
	Register(s, "process/revoke", "Withdraw a grant.", func(ctx context.Context, p *api.ProcessGrantParams) (*api.ProcessResult, error) {
		return h.RevokeProcess(context.WithoutCancel(ctx), *p)
	})
	Register(s, api.MethodApprovalDecide, "Answer an approval: allow_once, allow_session or deny (with a message for the model). The first answer wins.", func(ctx context.Context, p *api.DecideParams) (*api.RequestResult, error) {
		return h.DecideApproval(context.WithoutCancel(ctx), *p)
	})
	Register(s, api.MethodInputAnswer, "Answer a question the model asked (ask_user): text, or the index of a choice.", func(ctx context.Context, p *api.AnswerParams) (*api.RequestResult, error) {
		return h.AnswerInput(context.WithoutCancel(ctx), *p)
	})
	Register(s, api.MethodToolResult, "Give the result of a call of a tool the client executes (tool.call.requested).", func(ctx context.Context, p *api.ToolResultParams) (*api.RequestResult, error) {
		return h.ToolResult(context.WithoutCancel(ctx), *p)
	})
	Register(s, api.MethodRequestList, "List requests to people and clients (open ones by default), oldest first.", func(ctx context.Context, p *api.ListRequestsParams) (*api.ListRequestsResult, error) {
		return h.ListRequests(ctx, *p)
	})
	Register(s, api.MethodApprovalList, "List approvals (open ones by default), oldest first.", func(ctx context.Context, p *api.ListRequestsParams) (*api.ListRequestsResult, error) {
		if p.Kind != "" && p.Kind != event.RequestApproval {
			return nil, api.Errorf(api.KindInvalidParams, "approval/list lists approvals: leave kind out, or use request/list").With("field", "kind")
		}
		p.Kind = event.RequestApproval
		return h.ListRequests(ctx, *p)
	})
	Register(s, api.MethodRequestGet, "Get a request.", func(ctx context.Context, p *api.RequestIDParams) (*api.RequestResult, error) {
		return h.GetRequest(ctx, *p)
	})
	Register(s, "process/follow", "Follow a process's output from an offset: notifications process/output, then process/closed (WebSocket and stdio).", m.followProcess)
	registerEvents(s)
	RegisterEventType[api.ProcessOutputNotification](s, api.NotifyProcessOutput, "Notification: a chunk of a followed process's output.")
	RegisterEventType[api.ProcessClosedNotification](s, api.NotifyProcessClosed, "Notification: a process follow ended.")
	RegisterEventType[api.EventNotification](s, api.NotifyEvent, "Notification: one event of a subscription.")
	RegisterEventType[api.ClosedNotification](s, api.NotifyClosed, "Notification: a subscription ended; resume after cursor.")
	return s
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

func (m *hostMethods) subscribe(ctx context.Context, p *api.SubscribeParams) (*api.SubscribeResult, error) {
	conn, err := pushConn(ctx, "events/subscribe", "events/read or the SSE endpoint GET /v1/sessions/{id}/events")
	if err != nil {
		return nil, err
	}
	subCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The replay's pages are admitted into the server's stream budget
	// as they are read (see streamBudget).
	gate := &replayGate{acct: conn.acct}
	seq, err := m.h.SubscribeEncoded(journal.WithReplayGate(subCtx, gate), p.SessionID, p.After, p.RunID)
	if err != nil {
		cancel()
		return nil, err
	}
	id := m.open(ctx, conn, subCtx, cancel, func(id string, sub *subscription) {
		closed := api.ClosedNotification{SubscriptionID: id, Cursor: p.After}
		prefix := eventFramePrefix(id)
		defer gate.release()
	read:
		for evs, err := range seq {
			if err != nil {
				var tell bool
				if closed.Reason, closed.Message, tell = m.end(sub, subCtx, err); !tell {
					return
				}
				break read
			}
			for _, e := range evs {
				frame, err := eventFrame(prefix, e)
				if err != nil {
					closed.Reason, closed.Message = api.ReasonError, err.Error()
					break read
				}
				if e.JSON == nil { // a replayed event, in a page the budget admitted
					err = conn.notifyAdmitted(subCtx, api.NotifyEvent, frame)
				} else {
					err = conn.notifyFrame(subCtx, api.NotifyEvent, frame)
				}
				if err != nil {
					return
				}
				closed.Cursor = e.Event.Seq
			}
			gate.release() // the page's events are in their frames now
		}
		if closed.Reason == "" {
			closed.Reason = api.ReasonClosed
		}
		_ = conn.NotifyWait(context.WithoutCancel(subCtx), api.NotifyClosed, closed)
	})
	return &api.SubscribeResult{SubscriptionID: id}, nil
}

// eventFramePrefix is the start of every events/event notification of
// subscription id, up to the event: the notification is
// {"jsonrpc":"2.0","method":"events/event","params":{"subscriptionId":id,"event":EVENT}},
// byte for byte what encoding an api.EventNotification gives.
func eventFramePrefix(id string) []byte {
	quoted, _ := json.Marshal(id) // a string always marshals
	params := append(append([]byte(`{"subscriptionId":`), quoted...), `,"event":`...)
	frame := jsonrpc.AppendRequest(nil, nil, api.NotifyEvent, params)
	return frame[:len(frame)-1] // AppendRequest's closing brace
}

// eventFrame is the events/event notification of e: with its JSON
// encoding when it has one (shared by every subscriber), else encoded
// into the frame, its data copied once.
func eventFrame(prefix []byte, e event.Encoded) ([]byte, error) {
	if e.JSON != nil {
		frame := make([]byte, 0, len(prefix)+len(e.JSON)+2)
		frame = append(frame, prefix...)
		frame = append(frame, e.JSON...)
		return append(frame, "}}"...), nil
	}
	data, err := e.Event.JSONData()
	if err != nil {
		return nil, err
	}
	frame := make([]byte, 0, len(prefix)+160+len(e.Event.SessionID)+len(e.Event.RunID)+len(data))
	frame = append(frame, prefix...)
	frame = e.Event.AppendJSONHead(frame)
	frame = append(frame, data...)
	return append(frame, "}}}"...), nil
}

// pushConn returns the handler's connection if it can carry notifications
// (WebSocket, stdio); over plain HTTP the caller is pointed at alt.
func pushConn(ctx context.Context, method, alt string) (*Conn, error) {
	conn := ConnFrom(ctx)
	if conn == nil || conn.Transport() == "http" {
		return nil, api.NewError(api.KindInvalidRequest, method+" needs a WebSocket or stdio connection; over plain HTTP use "+alt)
	}
	return conn, nil
}

// open registers a subscription of conn and runs pump in a goroutine once
// the reply naming it is queued (AfterReply), so that its notifications
// follow the reply. subCtx, cancelled by cancel, ends pump; unsubscribe
// and the connection's close cancel it, and the connection waits for pump
// before it finishes closing.
func (m *hostMethods) open(ctx context.Context, conn *Conn, subCtx context.Context, cancel context.CancelFunc, pump func(id string, sub *subscription)) string {
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
		pump(id, sub)
	}
	if !AfterReply(ctx, func() { go run() }) {
		go run()
	}
	return id
}

// end says why a subscription's source failed with err: the reason and
// message to send in its closing notification, and whether anyone is
// left to tell (not when the connection itself closed).
func (m *hostMethods) end(sub *subscription, subCtx context.Context, err error) (reason, message string, tell bool) {
	m.mu.Lock()
	reason = sub.reason
	m.mu.Unlock()
	switch {
	case reason != "":
		return reason, "", true
	case errors.Is(err, journal.ErrLagged):
		return api.ReasonOverflow, "the subscriber fell behind; resume after the cursor", true
	case subCtx.Err() != nil:
		return "", "", false
	case errors.Is(err, journal.ErrClosed), errors.Is(err, process.ErrClosed):
		return api.ReasonClosed, "the host is shutting down", true
	}
	return api.ReasonError, err.Error(), true
}

func (m *hostMethods) unsubscribe(ctx context.Context, p *api.UnsubscribeParams) (*api.UnsubscribeResult, error) {
	m.mu.Lock()
	sub, ok := m.subs[p.SubscriptionID]
	if ok && sub.conn != ConnFrom(ctx) {
		ok = false // another connection's subscription: do not leak it
	}
	if ok {
		sub.reason = api.ReasonUnsubscribed
	}
	m.mu.Unlock()
	if !ok {
		return nil, api.Errorf(api.KindNotFound, "subscription %s not found", p.SubscriptionID)
	}
	sub.cancel()
	sub.wg.Wait()
	return &api.UnsubscribeResult{Unsubscribed: true}, nil
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
	RegisterEventType[event.MountInfoData](s, string(event.MountInfo), "The session's mounts at the start of a run, and the project instructions (AGENTS.md) the model was given.")
	RegisterEventType[event.ProcessData](s, string(event.ProcessStarted), "A background process of the session started.")
	RegisterEventType[event.ProcessData](s, string(event.ProcessExited), "A background process of the session ended.")
	RegisterEventType[event.ApprovalRequestedData](s, string(event.ApprovalRequested), "A tool call waits for a person's approval.")
	RegisterEventType[event.ApprovalResolvedData](s, string(event.ApprovalResolved), "The first answer to an approval (or its cancellation with the run).")
	RegisterEventType[event.ApprovalResolvedData](s, string(event.ApprovalExpired), "An approval's deadline passed; its decision is the policy's default.")
	RegisterEventType[event.InputRequestedData](s, string(event.InputRequested), "The model asks the user a question (ask_user).")
	RegisterEventType[event.InputResolvedData](s, string(event.InputResolved), "A question was answered, expired or cancelled.")
	RegisterEventType[event.ToolCallRequestedData](s, string(event.ToolCallRequested), "A call of a tool the client executes; tool/result answers it.")
	RegisterEventType[event.RunResumedData](s, string(event.RunResumed), "A run that waited for answers goes on.")
}

func (m *hostMethods) followProcess(ctx context.Context, p *api.ProcessFollowParams) (*api.SubscribeResult, error) {
	conn, err := pushConn(ctx, "process/follow", "process/output or GET /v1/processes/{id}/output")
	if err != nil {
		return nil, err
	}
	pm := m.h.Processes()
	if pm == nil {
		return nil, api.NewError(api.KindInvalidParams, "this host runs no background processes")
	}
	caller := process.Caller{Host: p.SessionID == "", SessionID: p.SessionID}
	if _, err := m.h.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: p.SessionID}); err != nil {
		return nil, err
	}
	subCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The pages of output are admitted into the server's stream budget
	// as they are read, and given back once in their frames.
	gate := &replayGate{acct: conn.acct}
	id := m.open(ctx, conn, subCtx, cancel, func(id string, sub *subscription) {
		closed := api.ProcessClosedNotification{SubscriptionID: id, Reason: "ended", Offset: p.Offset}
		defer gate.release()
		for c, err := range pm.Follow(process.WithPageGate(subCtx, gate), p.ID, p.Offset, caller) {
			if err != nil {
				var tell bool
				if closed.Reason, closed.Message, tell = m.end(sub, subCtx, err); !tell {
					return
				}
				break
			}
			if err := conn.NotifyWait(subCtx, api.NotifyProcessOutput, api.ProcessOutputNotification{SubscriptionID: id, Chunk: c}); err != nil {
				return
			}
			gate.releaseSome(int64(process.ChunkCost(c)))
			closed.Offset = c.End()
		}
		_ = conn.NotifyWait(context.WithoutCancel(subCtx), api.NotifyProcessClosed, closed)
	})
	return &api.SubscribeResult{SubscriptionID: id}, nil
}
