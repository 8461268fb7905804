package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/jsonrpc"
	"weft.dev/weft/store"
)

// Forwarder sends a request for a session another host owns to that
// host (holder, the lease holder's name) and returns its result, or its
// error as an *api.Error exactly as the owner answered. Hosts of one
// PostgreSQL store use it so that a client may send any command to any
// host: the owner applies it under its lease, with its receipts,
// idempotency and errors. It must be safe for concurrent use.
type Forwarder interface {
	Forward(ctx context.Context, holder, method string, params json.RawMessage) (json.RawMessage, error)
}

// ForwardedHeader marks an HTTP request a host forwarded: its receiver
// never forwards it again. A session it does not own (ownership moved
// meanwhile, or the owner died and another process now listens at its
// address) answers overloaded, which is retryable, rather than bouncing
// between hosts: the client's retry finds the owner of then, or, once
// the dead owner's lease expired, a host that takes the session.
const ForwardedHeader = "Weft-Forwarded"

type forwardedKey struct{}

// withForwarded marks ctx as serving a forwarded request when r is one.
func withForwarded(ctx context.Context, r *http.Request) context.Context {
	if r.Header.Get(ForwardedHeader) != "" {
		return context.WithValue(ctx, forwardedKey{}, true)
	}
	return ctx
}

// forward sends req to the host that holds its session's lease when err
// says another live host holds it and the server has a Forwarder; ok
// reports whether it did.
func (s *Server) forward(ctx context.Context, req *jsonrpc.Request, err error) (result json.RawMessage, ferr error, ok bool) {
	var held *store.LeaseHeldError
	if s.cfg.Forward == nil || !errors.As(err, &held) {
		return nil, nil, false
	}
	if ctx.Value(forwardedKey{}) != nil {
		// Forwarded here as to the owner, but this process does not
		// own the session: the run_conflict of a session held
		// elsewhere would tell the client not to retry (the busy
		// refusal is a run_conflict too), when a retry is what works.
		return nil, api.Wrap(api.KindOverloaded, err, "%s was forwarded to this host as the owner of session %s, but %s holds it (the session moved, or this host restarted at its owner's address): retry",
			req.Method, held.SessionID, held.Holder).With("sessionId", held.SessionID).With("holder", held.Holder), true
	}
	s.log.Debug("rpc: forwarding to the session's owner", "method", req.Method, "id", string(req.ID), "session", held.SessionID, "holder", held.Holder)
	result, ferr = s.cfg.Forward.Forward(ctx, held.Holder, req.Method, req.Params)
	return result, ferr, true
}
