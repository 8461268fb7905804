package process

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/store/record"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// pollInterval is how often Await and Follow look at a process that is
// not live under this Manager (another host may end it).
const pollInterval = 500 * time.Millisecond

// Await waits until process id ends or timeout passes (zero: do not wait)
// and returns its record and an excerpt of its output within
// Config.TailBytes: all of it, or its head and its tail with the count of
// the bytes omitted between them (lost ranges marked in the text). A caller that cannot
// address the process gets [ErrNotFound], and the attempt is recorded in
// the process log. ctx ends the wait early with ctx's error.
func (m *Manager) Await(ctx context.Context, id string, timeout time.Duration, caller Caller) (api.AwaitResult, error) {
	rec, p, err := m.access(ctx, id, caller, "await", true)
	if err != nil {
		return api.AwaitResult{}, err
	}
	timer := time.NewTimer(max(timeout, 0))
	defer timer.Stop()
	timedOut := false
wait:
	for !record.IsProcessTerminal(rec.Status) {
		var tick <-chan time.Time
		var done <-chan struct{}
		if p != nil {
			done = p.done
		} else {
			t := time.NewTimer(pollInterval)
			defer t.Stop()
			tick = t.C
		}
		select {
		case <-done:
		case <-tick:
		case <-timer.C:
			timedOut = true
			break wait
		case <-ctx.Done():
			return api.AwaitResult{}, ctx.Err()
		}
		if rec, p, err = m.get(ctx, id); err != nil {
			return api.AwaitResult{}, err
		}
	}
	if timedOut {
		if rec, _, err = m.get(ctx, id); err != nil {
			return api.AwaitResult{}, err
		}
	}
	res, err := m.excerpt(ctx, rec, m.cfg.TailBytes)
	if err != nil {
		return api.AwaitResult{}, err
	}
	res.Process, res.TimedOut = rec, !record.IsProcessTerminal(rec.Status)
	return res, nil
}

// Output reads up to limit bytes (zero: 64 KiB) of process id's output from
// offset. An offset below the trim point is not an error: the result is
// Truncated and starts at the earliest available offset. Visibility as
// for [Manager.Get].
func (m *Manager) Output(ctx context.Context, id string, offset int64, limit int, caller Caller) (api.Output, error) {
	rec, _, err := m.access(ctx, id, caller, "output", false)
	if err != nil {
		return api.Output{}, err
	}
	if limit <= 0 {
		limit = 64 << 10
	}
	return m.output(ctx, rec, max(offset, 0), limit)
}

func (m *Manager) output(ctx context.Context, rec record.Process, offset int64, limit int) (api.Output, error) {
	out := api.Output{Offset: offset, Next: offset, Total: rec.OutputBytes}
	first := true
	for len(out.Data) < limit {
		evs, err := m.st.ProcessOutput(ctx, store.ProcessOutputParams{ProcessID: rec.ID, Offset: out.Next, Limit: 16})
		if err != nil {
			return api.Output{}, fmt.Errorf("process %s: read output: %w", rec.ID, err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if first && e.Offset > out.Next {
				out.Truncated, out.Offset, out.Next = true, e.Offset, e.Offset
			}
			first = false
			if e.Offset > out.Next { // a hole (cannot happen in one log)
				out.Next = e.Offset
			}
			if e.Type == EventOutputLost {
				var d OutputLostData
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return api.Output{}, fmt.Errorf("process %s: lost output seq %d: %w", rec.ID, e.Seq, err)
				}
				n := e.Offset + e.Size - out.Next
				out.Chunks = append(out.Chunks, api.Chunk{Offset: out.Next, Data: []byte{}, Lost: n, Reason: d.Reason})
				out.Lost += n
				out.Next += n
				continue
			}
			var d OutputData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return api.Output{}, fmt.Errorf("process %s: output seq %d: %w", rec.ID, e.Seq, err)
			}
			b := d.Bytes()
			b = b[out.Next-e.Offset:]
			b = b[:min(len(b), limit-len(out.Data))]
			out.Chunks = append(out.Chunks, api.Chunk{Stream: d.Stream, Offset: out.Next, Data: b})
			out.Data = append(out.Data, b...)
			out.Next += int64(len(b))
			if len(out.Data) >= limit {
				break
			}
		}
		if len(evs) < 16 {
			break
		}
	}
	if first && rec.TrimmedBefore > out.Next && out.Next < rec.OutputBytes {
		out.Truncated, out.Offset, out.Next = true, rec.TrimmedBefore, rec.TrimmedBefore
	}
	if out.Data == nil {
		out.Data = []byte{}
	}
	out.Ended = record.IsProcessTerminal(rec.Status) && out.Next >= rec.OutputBytes
	return out, nil
}

// Text renders out as text for people and models: its bytes (invalid
// UTF-8 replaced) with each lost range as its [api.Chunk.LostNote] on a
// line of its own.
func Text(out api.Output) string {
	var b strings.Builder
	for _, c := range out.Chunks {
		if c.Lost > 0 {
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
				b.WriteByte('\n')
			}
			b.WriteString(c.LostNote())
			b.WriteByte('\n')
			continue
		}
		b.Write(c.Data)
	}
	if len(out.Chunks) == 0 {
		b.Write(out.Data)
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// Follow yields process id's output from offset: what is stored first,
// then live as it is committed, until the process ends and everything is
// yielded, ctx ends (the error is ctx's) or the consumer stops. A chunk
// that follows dropped output says how much it skipped. The iterator is
// single-use; it holds no lock while yielding and no goroutine. It reads
// pages of up to 256 KiB, each admitted by ctx's [PageGate] if it carries
// one. Visibility as for [Manager.Get]; errors arrive as the iterator's
// error.
func (m *Manager) Follow(ctx context.Context, id string, offset int64, caller Caller) iter.Seq2[api.Chunk, error] {
	return func(yield func(api.Chunk, error) bool) {
		if _, _, err := m.access(ctx, id, caller, "follow", false); err != nil {
			yield(api.Chunk{}, err)
			return
		}
		gate, _ := ctx.Value(pageGateKey{}).(PageGate)
		next := max(offset, 0)
		for {
			// Take the change signal before reading, so nothing
			// committed after the read is missed.
			rec, p, err := m.get(ctx, id)
			if err != nil {
				yield(api.Chunk{}, err)
				return
			}
			var changed <-chan struct{}
			if p != nil {
				rec, changed = p.snapshot()
			}
			out, err := m.readPage(ctx, gate, rec, next)
			if err != nil {
				yield(api.Chunk{}, err)
				return
			}
			for i, c := range out.Chunks {
				if i == 0 && out.Truncated {
					c.Skipped = out.Offset - next
				}
				if !yield(c, nil) {
					return
				}
			}
			next = out.Next
			if len(out.Chunks) > 0 {
				continue
			}
			if record.IsProcessTerminal(rec.Status) && next >= rec.OutputBytes {
				return
			}
			var tick <-chan time.Time
			if changed == nil {
				t := time.NewTimer(pollInterval)
				tick = t.C
				defer t.Stop()
			}
			select {
			case <-changed:
			case <-tick:
			case <-ctx.Done():
				yield(api.Chunk{}, ctx.Err())
				return
			}
		}
	}
}

// followPageBytes bounds one page of output that [Manager.Follow] reads
// and yields.
const followPageBytes = 256 << 10

// A PageGate admits the output pages [Manager.Follow] reads, so that
// its consumers can bound what all of them hold together: a host with
// hundreds of followers that stopped reading would otherwise hold a page
// for each. A Follow whose ctx carries a gate ([WithPageGate]) calls
// StartRead before each page it reads from the store and, if that
// succeeded, EndRead after it with the page's cost (the sum of
// [ChunkCost] of its chunks; 0 when the read failed), before the page is
// yielded. Either may wait; an error from either ends the Follow with
// that error. Both are called from the Follow's goroutine. The consumer
// gives a chunk's cost back once it is done with it. Its methods are
// those of journal.ReplayGate, so one gate can serve both.
type PageGate interface {
	StartRead(ctx context.Context) error
	EndRead(ctx context.Context, cost int) error
}

type pageGateKey struct{}

// WithPageGate returns ctx carrying g for the [Manager.Follow] calls
// made with it.
func WithPageGate(ctx context.Context, g PageGate) context.Context {
	return context.WithValue(ctx, pageGateKey{}, g)
}

// ChunkCost is what a chunk that Follow yields counts against a
// [PageGate]: its data as base64 in JSON, and the fields around it.
func ChunkCost(c api.Chunk) int { return c.Cost() }

// readPage reads one page of output from next through gate, if not nil.
func (m *Manager) readPage(ctx context.Context, gate PageGate, rec record.Process, next int64) (api.Output, error) {
	if gate == nil {
		return m.output(ctx, rec, next, followPageBytes)
	}
	if err := gate.StartRead(ctx); err != nil {
		return api.Output{}, err
	}
	out, err := m.output(ctx, rec, next, followPageBytes)
	cost := 0
	for _, c := range out.Chunks {
		cost += ChunkCost(c)
	}
	if gerr := gate.EndRead(ctx, cost); gerr != nil && err == nil {
		return api.Output{}, gerr
	}
	return out, err
}

// Write writes data to the stdin (or pty) of a running shell process and
// records the byte count in its log. Errors: [ErrNotFound] (recorded) for
// a caller that cannot address it, [ErrEnded] for a process that is not
// running under this Manager or has no input.
func (m *Manager) Write(ctx context.Context, id string, data []byte, caller Caller) error {
	rec, p, err := m.access(ctx, id, caller, "write", true)
	if err != nil {
		return err
	}
	if p != nil && rec.Kind == record.ProcessAgent {
		// A subagent's input is a steer of its child run.
		r, ok := m.hooks.Load().tools.(AgentRunner)
		if !ok {
			return fmt.Errorf("%w: %s: no input to write to", ErrEnded, id)
		}
		if err := r.SteerAgent(ctx, rec, string(data)); err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.appendLocked(ctx, []record.ProcessEvent{newEvent(EventInput, InputData{Bytes: len(data), By: caller})}, nil, caller)
	}
	if p == nil || p.stdin == nil {
		return fmt.Errorf("%w: %s: no input to write to", ErrEnded, id)
	}
	if _, err := p.stdin.Write(data); err != nil {
		return fmt.Errorf("%w: %s: write input: %v", ErrEnded, id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.appendLocked(ctx, []record.ProcessEvent{newEvent(EventInput, InputData{Bytes: len(data), By: caller})}, nil, caller)
}

// CloseInput closes the stdin of a running shell process (not of a pty),
// so that a program reading it sees end of file. Errors as for Write.
func (m *Manager) CloseInput(ctx context.Context, id string, caller Caller) error {
	_, p, err := m.access(ctx, id, caller, "write", true)
	if err != nil {
		return err
	}
	if p == nil || p.stdin == nil || p.stdin == p.pty {
		return fmt.Errorf("%w: %s: no input to close", ErrEnded, id)
	}
	return p.stdin.Close()
}

// signalNameRE is compiled on first use, not at start: most commands never need it.
var signalNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`) })

// posixSignals are the signal names that also reach a shell's process
// group.
var posixSignals = map[string]syscall.Signal{
	"interrupt": syscall.SIGINT,
	"terminate": syscall.SIGTERM,
	"kill":      syscall.SIGKILL,
	"hangup":    syscall.SIGHUP,
}

// Signal appends signal.<name> with payload to process id's log and
// returns its seq. For a live shell process the names interrupt,
// terminate and hangup also send SIGINT, SIGTERM or SIGHUP to its process
// group (under the sandbox helper, through the helper), and kill ends its
// whole process tree with SIGKILL. name must match [a-z0-9][a-z0-9_.-]{0,63}
// ([ErrInvalid]); payload must be JSON or empty. A caller that cannot
// address the process gets [ErrNotFound] (recorded); an ended process
// [ErrEnded].
func (m *Manager) Signal(ctx context.Context, id, name string, payload json.RawMessage, caller Caller) (int64, error) {
	if !signalNameRE().MatchString(name) {
		return 0, fmt.Errorf("%w: signal name %q: want [a-z0-9][a-z0-9_.-]{0,63}", ErrInvalid, name)
	}
	if len(payload) > 0 && !json.Valid(payload) {
		return 0, fmt.Errorf("%w: signal payload is not valid JSON", ErrInvalid)
	}
	if _, _, err := m.access(ctx, id, caller, "signal", true); err != nil {
		return 0, err
	}
	var sig syscall.Signal
	var target *proc
	rec, err := m.update(ctx, id, caller, func(rec *record.Process) ([]record.ProcessEvent, error) {
		if record.IsProcessTerminal(rec.Status) {
			return nil, fmt.Errorf("%w: %s is %s", ErrEnded, id, rec.Status)
		}
		d := SignalData{Payload: payload, By: caller}
		// A recorded group means the shell has started.
		if s, ok := posixSignals[name]; ok && rec.Kind == record.ProcessShell && rec.Pgid > 0 {
			if p := m.liveProc(id); p != nil {
				sig, target, d.Posix = s, p, signalName(s)
			}
		}
		return []record.ProcessEvent{newEvent(event.Type(SignalPrefix+name), d)}, nil
	})
	if err != nil {
		return 0, err
	}
	if target != nil {
		target.signal(sig)
	}
	return rec.LastSeq, nil
}

// Cancel asks process id to stop and waits until it has ended (ctx bounds
// the wait). A caller that cannot address it gets [ErrNotFound]; one the
// [CancelPolicy] refuses gets an error wrapping [ErrDenied] and the
// policy's error. Both attempts are recorded as process.cancel_requested
// with denied set. An allowed cancel records process.cancel_requested,
// sends SIGTERM to a shell's group (then, after Config.KillGrace, SIGKILL
// to its whole tree) or cancels a tool call's ctx; the terminal event is process.cancelled. A
// process that is running in the store but not under this Manager (left by
// an earlier host) is marked cancelled at once, after its recorded group
// is swept. Cancelling an ended process returns its record unchanged.
func (m *Manager) Cancel(ctx context.Context, id, reason string, caller Caller) (record.Process, error) {
	rec, _, err := m.access(ctx, id, caller, "cancel", true)
	if err != nil {
		return record.Process{}, err
	}
	if record.IsProcessTerminal(rec.Status) {
		return rec, nil
	}
	if perr := m.cfg.Policy.AllowCancel(ctx, rec, caller); perr != nil {
		ev := newEvent(EventCancelRequested, CancelRequestedData{By: caller, Reason: reason, Denied: true, DenyReason: perr.Error()})
		if _, err := m.update(context.WithoutCancel(ctx), id, Caller{}, func(*record.Process) ([]record.ProcessEvent, error) {
			return []record.ProcessEvent{ev}, nil
		}); err != nil {
			m.log.Warn("record denied cancel", "process", id, "err", err)
		}
		return record.Process{}, fmt.Errorf("%w: cancel of process %s: %w", ErrDenied, id, perr)
	}
	req := &CancelRequestedData{By: caller, Reason: reason}
	if p := m.liveProc(id); p != nil {
		p.mu.Lock()
		already := p.cancelq != nil
		var aerr error
		if !already && !record.IsProcessTerminal(p.rec.Status) {
			aerr = p.appendLocked(ctx, []record.ProcessEvent{newEvent(EventCancelRequested, req)}, nil, caller)
			if aerr == nil {
				p.cancelq = req
			}
		}
		stop := p.stopTool
		p.mu.Unlock()
		if aerr != nil {
			return record.Process{}, aerr
		}
		if p.cmd != nil {
			p.signal(syscall.SIGTERM)
			grace := time.NewTimer(m.cfg.KillGrace)
			select {
			case <-p.done:
			case <-grace.C:
				p.kill()
			case <-ctx.Done():
			}
			grace.Stop()
		} else if stop != nil {
			stop(ErrCancelled)
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return record.Process{}, ctx.Err()
		}
		rec, _, err := m.get(ctx, id)
		return rec, err
	}
	// Not live here: settle the record.
	var killed []int
	if rec.Pgid > 0 {
		killed = sweep(rec.Pgid, rec.ID)
	}
	var ended bool
	rec, err = m.update(ctx, id, caller, func(r *record.Process) ([]record.ProcessEvent, error) {
		if record.IsProcessTerminal(r.Status) {
			return nil, nil
		}
		ended = true
		now := time.Now().UTC()
		r.Status, r.EndedAt = record.ProcessCancelled, &now
		return []record.ProcessEvent{
			newEvent(EventCancelRequested, req),
			newEvent(EventCancelled, EndedData{Status: record.ProcessCancelled, Cancel: req,
				Evidence: &Evidence{Writer: "cancel", Reason: "not running under this host", Pgid: r.Pgid, Killed: killed}}),
		}, nil
	})
	if err != nil {
		return record.Process{}, err
	}
	if ended && m.hooks.Load().notify != nil {
		m.hooks.Load().notify.ProcessEnded(rec)
	}
	return rec, nil
}
