package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/ids"
	"weft.dev/weft/internal/jsonrpc"
)

// HostConfig configures [NewHostServer].
type HostConfig struct {
	Config
}

// NewHostServer returns a server that serves h: every method of the
// table ([api.Methods]) registered, each handler decoding its params and
// calling h through the method's descriptor, and the table's event types
// and notifications described for rpc.discover. Mutating methods run with
// a context the client's going away does not cancel (a mutation is never
// cut short half-way); the others are cancelled with their connection.
//
// h may be any [api.Host]: the host in this process (package host), or
// a client of another. What only a host in this process has is found by
// type assertion: a host with a SubscribeEncoded method (as package
// host's Host has) hands each live event over with its
// encoding, shared by every subscriber, and replays through the stream
// budget's gate ([api.WithPageGate]); any other is subscribed through
// [api.Host.Subscribe] and its events encoded here.
func NewHostServer(h api.Host, cfg HostConfig) *Server {
	s := NewServer(cfg.Config)
	m := &hostMethods{h: h, subs: map[string]*subscription{}}
	for _, d := range api.Methods() {
		if info := d.Info(); !info.Conn && !info.Stream() {
			s.add(tableMethod(d, h, s.cfg.TypeSchemas))
		}
	}
	handleStream(s, api.EventsSubscribe, m.subscribe)
	handleStream(s, api.ProcessFollow, m.followProcess)
	Register(s, api.EventsUnsubscribe.Name, api.EventsUnsubscribe.Doc, m.unsubscribe)
	for _, d := range api.Methods() {
		if s.lookup(d.Info().Name) == nil {
			panic(fmt.Sprintf("rpc: NewHostServer: method %s of the table has no handler", d.Info().Name))
		}
	}
	for _, e := range api.Events() {
		s.RegisterEvent(string(e.Type), e.Doc, e.Data)
	}
	for _, n := range api.Notifications() {
		s.registerNotification(n)
	}
	return s
}

// HostDocument returns the OpenRPC document that a server made by
// [NewHostServer] with cfg serves as rpc.discover, without a host: the
// method table, its params and results as JSON Schema, the notifications,
// the event types and the error codes. cfg's ServerInfo and
// ProtocolVersion name the document; its other fields do not change it.
// `weft schema` prints it.
func HostDocument(cfg Config) (json.RawMessage, error) {
	s := NewHostServer(nil, HostConfig{Config: cfg})
	defer s.Close()
	return s.discoverDoc()
}

// tableMethod is the handler of descriptor d on h: strict params into a
// new value of d's params type, then d's Host method. A mutating method
// runs on a context that outlives its connection.
func tableMethod(d api.Descriptor, h api.Host, types map[reflect.Type]*jsonschema.Schema) *method {
	info := d.Info()
	m := describe(info.Name, info.Doc, info.Params, info.Result, types)
	m.mutating = info.Mutating
	m.call = func(ctx context.Context, raw json.RawMessage) (any, error) {
		p := d.NewParams()
		if err := m.decodeParams(raw, p); err != nil {
			return nil, err
		}
		if info.Mutating {
			ctx = context.WithoutCancel(ctx)
		}
		return d.Invoke(ctx, h, p)
	}
	return m
}

// handleStream registers the handler of stream d: it answers with the
// subscription and sends d's notifications.
func handleStream[P api.Params, T any](s *Server, d api.Stream[P, T], h func(context.Context, *P) (*api.SubscribeResult, error)) {
	m := newMethod(d.Name, d.Doc, h, s.cfg.TypeSchemas)
	m.notes = d.Info().Notifications
	s.add(m)
}

// encodedSubscriber is what a host in this process adds to api.Host: a
// subscription whose live events come with their shared encoding.
type encodedSubscriber interface {
	SubscribeEncoded(ctx context.Context, p api.SubscribeParams) (iter.Seq2[[]event.Encoded, error], error)
}

// encodedEvents subscribes to h: through SubscribeEncoded when h has it,
// else through Subscribe with each event encoded here (and so counted in
// the stream budget as a live event is).
func encodedEvents(ctx context.Context, h api.Host, p api.SubscribeParams) (iter.Seq2[[]event.Encoded, error], error) {
	if es, ok := h.(encodedSubscriber); ok {
		return es.SubscribeEncoded(ctx, p)
	}
	seq, err := h.Subscribe(ctx, p)
	if err != nil {
		return nil, err
	}
	return func(yield func([]event.Encoded, error) bool) {
		var one [1]event.Encoded
		for e, err := range seq {
			if err == nil {
				var b []byte
				if b, err = e.AppendJSON(nil); err == nil {
					one[0] = event.Encoded{Event: e, JSON: b}
					if !yield(one[:], nil) {
						return
					}
					continue
				}
			}
			yield(nil, err)
			return
		}
	}, nil
}

// hostMethods holds the subscriptions of every connection.
type hostMethods struct {
	h    api.Host
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
	seq, err := encodedEvents(api.WithPageGate(subCtx, gate), m.h, *p)
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
			for len(evs) > 0 {
				if live := liveRun(evs); live > 0 {
					// Live events: their shared encoding, queued in runs.
					n, err := conn.notifyEvents(subCtx, prefix, evs[:live])
					if n > 0 {
						closed.Cursor = evs[n-1].Event.Seq
					}
					if err != nil {
						return
					}
					evs = evs[live:]
					continue
				}
				// A replayed event, in a page the budget admitted.
				e := evs[0]
				frame, err := eventFrame(prefix, e)
				if err != nil {
					closed.Reason, closed.Message = api.ReasonError, err.Error()
					break read
				}
				if err := conn.notifyAdmitted(subCtx, api.NotifyEvent, frame); err != nil {
					return
				}
				closed.Cursor = e.Event.Seq
				evs = evs[1:]
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

// eventFrameSuffix ends every events/event notification: it closes
// the params and the notification after the event.
const eventFrameSuffix = "}}"

// liveRun returns how many events at the start of evs have their shared
// encoding (live events, as opposed to replayed ones).
func liveRun(evs []event.Encoded) int {
	for i, e := range evs {
		if e.JSON == nil {
			return i
		}
	}
	return len(evs)
}

// eventFrame is the events/event notification of e: with its JSON
// encoding when it has one (shared by every subscriber), else encoded
// into the frame, its data copied once.
func eventFrame(prefix []byte, e event.Encoded) ([]byte, error) {
	if e.JSON != nil {
		frame := make([]byte, 0, len(prefix)+len(e.JSON)+len(eventFrameSuffix))
		frame = append(frame, prefix...)
		frame = append(frame, e.JSON...)
		return append(frame, eventFrameSuffix...), nil
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
	case errors.Is(err, api.ErrLagged):
		return api.ReasonOverflow, "the subscriber fell behind; resume after the cursor", true
	case subCtx.Err() != nil:
		return "", "", false
	case errors.Is(err, api.ErrOverloaded):
		// The api.Host contract: a stream the host ends because it is
		// closing ends with an error of kind overloaded.
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

func (m *hostMethods) followProcess(ctx context.Context, p *api.ProcessFollowParams) (*api.SubscribeResult, error) {
	conn, err := pushConn(ctx, "process/follow", "process/output or GET /v1/processes/{id}/output")
	if err != nil {
		return nil, err
	}
	subCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The pages of output are admitted into the server's stream budget
	// as they are read, and given back once in their frames.
	gate := &replayGate{acct: conn.acct}
	seq, err := m.h.FollowProcess(api.WithPageGate(subCtx, gate), *p)
	if err != nil {
		cancel()
		return nil, err
	}
	id := m.open(ctx, conn, subCtx, cancel, func(id string, sub *subscription) {
		closed := api.ProcessClosedNotification{SubscriptionID: id, Reason: api.ReasonEnded, Offset: p.Offset}
		defer gate.release()
		for c, err := range seq {
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
			gate.releaseSome(int64(c.Cost()))
			closed.Offset = c.End()
		}
		_ = conn.NotifyWait(context.WithoutCancel(subCtx), api.NotifyProcessClosed, closed)
	})
	return &api.SubscribeResult{SubscriptionID: id}, nil
}
