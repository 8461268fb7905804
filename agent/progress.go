package agent

import (
	"context"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/tool"
)

// progressInterval is the least time between two tool.progress events of
// one call: reports that come sooner are dropped, since the next one says
// all they did (progress is a level), except the one that reaches the
// total.
const progressInterval = 100 * time.Millisecond

// progress records a call's progress reports as tool.progress events of
// the run. It implements [tool.Progress]; safe for concurrent use. After
// close it records nothing, so that no progress follows the call's
// result in the log.
type progress struct {
	l    *loop
	call event.ToolCall

	mu     sync.Mutex // held while an event is appended
	last   time.Time  // when the last event was recorded
	done   bool       // the total was reached
	closed bool
}

// Report implements [tool.Progress]. A failed append is not the call's
// failure: the result that follows meets the same store and says so.
func (p *progress) Report(ctx context.Context, u tool.ProgressUpdate) {
	final := u.Total > 0 && u.Progress >= u.Total
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.closed || p.done || !final && !p.last.IsZero() && now.Sub(p.last) < progressInterval {
		return
	}
	p.last, p.done = now, final
	msg := strings.ToValidUTF8(u.Message, "\uFFFD")
	if len(msg) > event.MaxProgressMessageBytes {
		msg = strings.ToValidUTF8(msg[:event.MaxProgressMessageBytes], "")
	}
	e, err := event.New(p.l.run.ID, event.ToolProgress, event.ToolProgressData{
		ID: p.call.ID, Name: p.call.Name, Progress: u.Progress, Total: u.Total, Message: msg,
	})
	if err != nil {
		return
	}
	_, _ = p.l.log.Append(ctx, e)
}

// close ends the reports: it returns once an append under way is done.
func (p *progress) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}
