package mcp

import (
	"context"
	"strconv"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/tool"
)

// progressRoutes routes servers' progress notifications to the calls that
// asked for them, by progress token. The tokens are the manager's own
// ("weft-<n>"), so a server cannot reach a call of another server's
// session by guessing. Safe for concurrent use.
type progressRoutes struct {
	mu    sync.Mutex
	next  uint64
	calls map[string]tool.Progress
}

// add routes the progress of a call to p and returns its token and a
// function that ends the route. A nil p gets no token ("").
func (r *progressRoutes) add(p tool.Progress) (string, func()) {
	if p == nil {
		return "", func() {}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	token := "weft-" + strconv.FormatUint(r.next, 10)
	if r.calls == nil {
		r.calls = map[string]tool.Progress{}
	}
	r.calls[token] = p
	return token, func() {
		r.mu.Lock()
		delete(r.calls, token)
		r.mu.Unlock()
	}
}

// report hands a notification to its call, if its route is still open;
// a notification with an unknown token is ignored, as the protocol says.
func (r *progressRoutes) report(ctx context.Context, n *sdk.ProgressNotificationParams) {
	if n == nil {
		return
	}
	token, ok := n.ProgressToken.(string)
	if !ok {
		return
	}
	r.mu.Lock()
	p := r.calls[token]
	r.mu.Unlock()
	if p != nil {
		p.Report(ctx, tool.ProgressUpdate{Progress: n.Progress, Total: n.Total, Message: n.Message})
	}
}
