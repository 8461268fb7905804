package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store"
	"weft.dev/weft/store/postgres"
)

// forwarder sends the commands for a session another host owns to that
// host: host-to-host JSON-RPC over HTTP, or HTTPS verifying the owner's
// certificate, at the address the owner registered in the nodes table, with this host's token (the hosts of one
// store share it), marked forwarded so that it is never forwarded again.
type forwarder struct {
	st    *postgres.Store
	token string
	http  *http.Client
}

// newForwarder returns the forwarder of a host on st. tlsConf verifies
// the owners that registered an https:// address (nil: the system's
// roots); verification is never skipped.
func newForwarder(st *postgres.Store, token string, tlsConf *tls.Config) *forwarder {
	hc := &http.Client{Timeout: 10 * time.Minute}
	if tlsConf != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tlsConf
		hc.Transport = t
	}
	return &forwarder{st: st, token: token, http: hc}
}

// errOwnerGone ends a forwarded call whose owner holds no live lease.
var errOwnerGone = errors.New("the owner holds no live lease")

// ownerCheck is how often a forwarded call in flight checks that its
// owner still holds a live lease.
const ownerCheck = 250 * time.Millisecond

// watchOwner cancels ctx with errOwnerGone once holder has no live lease
// in the store, and returns when ctx is done. A store that cannot be read
// leaves the call alone.
func (f *forwarder) watchOwner(ctx context.Context, cancel context.CancelCauseFunc, holder string) {
	t := time.NewTicker(ownerCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live, err := f.st.HolderLive(ctx, holder)
		if err != nil {
			continue
		}
		if !live {
			cancel(errOwnerGone)
			return
		}
	}
}

// Forward implements rpc.Forwarder.
func (f *forwarder) Forward(ctx context.Context, holder, method string, params json.RawMessage) (json.RawMessage, error) {
	addr, err := f.st.NodeAddr(ctx, holder)
	if errors.Is(err, store.ErrNotFound) {
		// A host that starts takes sessions before it registers its
		// address, and one that stops holds them a moment after it
		// removed it; a one-shot `weft run` never registers. A retry
		// works in each case, so the error says so: run_conflict would
		// read as a busy session, which a client does not retry.
		return nil, api.Errorf(api.KindOverloaded, "the session is in use by %s, which takes no forwarded commands now (a host starting or stopping, or a one-shot weft run); retry", holder).
			With("holder", holder)
	}
	if err != nil {
		return nil, api.Wrap(api.KindStorageUnavailable, err, "find the host that owns the session")
	}
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	body, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int             `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", 1, method, params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, httpBase(addr)+"rpc", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(rpc.ForwardedHeader, "1")
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	// A frozen owner (SIGSTOP, a partition) accepts the connection and
	// never answers: the call ends once the owner holds no live lease,
	// for the client's retry to find the session free.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req = req.WithContext(wctx)
	watched := make(chan struct{})
	defer func() { cancel(nil); <-watched }()
	go func() {
		defer close(watched)
		f.watchOwner(wctx, cancel, holder)
	}()
	resp, err := f.http.Do(req)
	if err != nil {
		if errors.Is(context.Cause(wctx), errOwnerGone) {
			return nil, api.Errorf(api.KindOverloaded, "forward %s to %s at %s: it stopped answering and its leases expired; retry, and this host takes the session", method, holder, addr).
				With("holder", holder)
		}
		if terr := tlsDialError(addr, err); terr != nil {
			// Not a retry's to fix, as with a token the owner refuses.
			return nil, api.Wrap(api.KindRunConflict, err, "the session is in use by %s, which this host cannot reach over TLS: %v; the hosts of one store must trust each other's certificates (start each with --tls-ca or WEFT_TLS_CA)", holder, terr).
				With("holder", holder)
		}
		return nil, api.Wrap(api.KindOverloaded, err, "forward %s to %s at %s, which owns the session", method, holder, addr).With("holder", holder)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, api.Wrap(api.KindOverloaded, err, "forward %s to %s at %s", method, holder, addr)
	}
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  *api.Error      `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("forward %s to %s at %s: HTTP %d: %w", method, holder, addr, resp.StatusCode, err)
	}
	if out.Error != nil {
		if out.Error.Kind == api.KindUnauthorized {
			return nil, api.Errorf(api.KindRunConflict, "the session is in use by %s at %s, which refused the command forwarded to it (%s): the hosts of one store must share a token (WEFT_TOKEN)", holder, addr, out.Error.Message).
				With("holder", holder)
		}
		return nil, out.Error
	}
	return out.Result, nil
}
