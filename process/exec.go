package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// StartParams describes a process to start.
type StartParams struct {
	// SessionID owns the process. Required.
	SessionID string
	// RunID is the run that starts it, if any; that run may always
	// address it.
	RunID string
	// Kind is record.ProcessShell, record.ProcessTool or
	// record.ProcessAgent. Required.
	Kind string
	// Command is the shell command line (shell processes).
	Command string
	// Tool and Args are the tool call (tool processes). Args must already
	// be validated against the tool's schema (see tool.Registry.Validate).
	Tool string
	Args json.RawMessage
	// Agent is a subagent process's child (kind record.ProcessAgent); the
	// Manager's tool runner must be an [AgentRunner].
	Agent *record.AgentSpec
	// Binding resolves the working directory of a shell process; it is
	// used during Start only. Required for shells.
	Binding *env.Binding
	// MountID is the mount the working directory lies in: Cwd is resolved
	// relative to it. Empty means Cwd as given (absolute display path or
	// relative to the default mount), or the shell mount's root.
	MountID string
	// Cwd is the working directory; it must be in a read-write mount.
	Cwd string
	// Env holds explicit variables, added after the allow-list.
	Env map[string]string
	// Disposition is record.Rerunnable, record.OwnerBound or
	// record.ExternallyOwned. Required; shells must be owner_bound
	// (rerunnable shells are accepted and abandoned at recovery like
	// owner_bound ones).
	Disposition string
	// PTY runs a shell process on a pseudo-terminal (stdout and stderr
	// combined as stream "pty").
	PTY bool
	// WakeOnExit is recorded for the host.
	WakeOnExit bool
	// Host and Epoch are recorded as the process's owner
	// ([record.Process.Host], [record.Process.Epoch]): the host that runs
	// it and the lease epoch of SessionID under which it does (zero
	// without fenced leases). Every batch of its log carries Epoch, so
	// that once another host holds a later lease of the session the store
	// refuses them ([store.ErrFenced]) and the Manager stops the process.
	Host  string
	Epoch int64
	// CreatedBy says who starts it (e.g. "tool:shell", "rpc").
	CreatedBy string
	// ID is the process ID; empty means a fresh "proc_…" one.
	ID string
	// ToolCallID is the tool call that asked for the process, if any.
	ToolCallID string
}

// Start registers and starts a process and returns its record once
// process.started is committed. The shell's output is captured from then
// on by goroutines the Manager owns until it ends.
//
// Errors: [ErrInvalid] for bad params, [ErrExists] for a used ID, an
// env error (wrapping env.ErrOutside, env.ErrNoMount, env.ErrReadOnly …)
// for a working directory the binding refuses, [ErrClosed] after Close, or
// a store error. On error nothing keeps running.
func (m *Manager) Start(ctx context.Context, sp StartParams) (record.Process, error) {
	p, err := m.start(ctx, sp)
	if err == nil {
		if n, ok := m.hooks.Load().notify.(StartNotifier); ok {
			n.ProcessStarted(p)
		}
	}
	return p, err
}

// StartNotifier is an optional interface of a [Notifier]: ProcessStarted
// is called after a process's process.started event is committed, so a
// host can record the process in its session's log.
type StartNotifier interface {
	ProcessStarted(p record.Process)
}

func (m *Manager) start(ctx context.Context, sp StartParams) (record.Process, error) {
	if sp.SessionID == "" {
		return record.Process{}, fmt.Errorf("%w: no session", ErrInvalid)
	}
	switch sp.Disposition {
	case record.Rerunnable, record.OwnerBound, record.ExternallyOwned:
	default:
		return record.Process{}, fmt.Errorf("%w: disposition %q: want %s, %s or %s", ErrInvalid, sp.Disposition, record.Rerunnable, record.OwnerBound, record.ExternallyOwned)
	}
	id := sp.ID
	if id == "" {
		id = newID()
	}
	if _, err := m.st.Process(ctx, id); err == nil {
		return record.Process{}, fmt.Errorf("%w: %s", ErrExists, id)
	} else if !errors.Is(err, store.ErrNotFound) {
		return record.Process{}, fmt.Errorf("process %s: %w", id, err)
	}
	rec := record.Process{
		ID: id, SessionID: sp.SessionID, RunID: sp.RunID, Kind: sp.Kind, Status: record.ProcessRunning,
		Disposition: sp.Disposition, CreatedBy: sp.CreatedBy, StartedAt: time.Now().UTC(), WakeOnExit: sp.WakeOnExit,
		ToolCallID: sp.ToolCallID, Host: sp.Host, Epoch: sp.Epoch,
	}
	switch sp.Kind {
	case record.ProcessShell:
		return m.startShell(ctx, rec, sp)
	case record.ProcessTool:
		if m.hooks.Load().tools == nil {
			return record.Process{}, fmt.Errorf("%w: tool processes are not configured", ErrInvalid)
		}
		if sp.Tool == "" {
			return record.Process{}, fmt.Errorf("%w: no tool name", ErrInvalid)
		}
		args := sp.Args
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		if !json.Valid(args) {
			return record.Process{}, fmt.Errorf("%w: tool arguments are not valid JSON", ErrInvalid)
		}
		rec.Spec = record.ProcessSpec{Tool: sp.Tool, Args: args}
		return m.startTool(ctx, rec, "")
	case record.ProcessAgent:
		if _, ok := m.hooks.Load().tools.(AgentRunner); !ok {
			return record.Process{}, fmt.Errorf("%w: subagents are not configured", ErrInvalid)
		}
		if sp.Agent == nil || sp.Agent.SessionID == "" {
			return record.Process{}, fmt.Errorf("%w: subagent without a child session", ErrInvalid)
		}
		a := *sp.Agent
		rec.Spec = record.ProcessSpec{Tool: "spawn_agent", Agent: &a}
		return m.startTool(ctx, rec, "")
	}
	return record.Process{}, fmt.Errorf("%w: kind %q: want %s, %s or %s", ErrInvalid, sp.Kind, record.ProcessShell, record.ProcessTool, record.ProcessAgent)
}

// workDir resolves the working directory of a shell through the binding.
func workDir(sp StartParams) (*env.Path, error) {
	b := sp.Binding
	if _, ok := b.ShellMount(); !ok && sp.Cwd == "" && sp.MountID == "" {
		return nil, fmt.Errorf("%w: no read-write mount is available for shell processes", ErrInvalid)
	}
	switch {
	case sp.MountID != "" && !strings.HasPrefix(sp.Cwd, "/"):
		return b.Resolve(path.Join("/environment", sp.MountID, sp.Cwd), env.Write)
	case sp.Cwd != "":
		return b.Resolve(sp.Cwd, env.Write)
	}
	return b.ShellDir()
}

func (m *Manager) shellEnv(id, dir string, extra map[string]string) []string {
	vars := map[string]string{}
	for _, kv := range m.cfg.BaseEnv {
		k, v, ok := strings.Cut(kv, "=")
		if ok && m.allow[k] {
			vars[k] = v
		}
	}
	if vars["PATH"] == "" {
		vars["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	if vars["HOME"] == "" {
		vars["HOME"] = dir
	}
	if vars["LANG"] == "" {
		vars["LANG"] = "C.UTF-8"
	}
	for k, v := range extra {
		vars[k] = v
	}
	// The marker by which recovery recognises the process's children.
	vars[MarkerEnv] = id
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// MarkerEnv is the variable every shell process and its children carry,
// set to the process ID. Recovery kills only members of a recorded process
// group that carry the marker, so a reused group ID never hits a stranger.
const MarkerEnv = "WEFT_PROCESS_ID"

func (m *Manager) startShell(ctx context.Context, rec record.Process, sp StartParams) (record.Process, error) {
	if strings.TrimSpace(sp.Command) == "" {
		return record.Process{}, fmt.Errorf("%w: empty command", ErrInvalid)
	}
	if len(sp.Command) > api.MaxShellCommandBytes {
		return record.Process{}, fmt.Errorf("%w: command: %d bytes, more than %d", ErrInvalid, len(sp.Command), api.MaxShellCommandBytes)
	}
	if sp.Disposition == record.ExternallyOwned {
		return record.Process{}, fmt.Errorf("%w: a shell started by the host cannot be externally owned", ErrInvalid)
	}
	for k := range sp.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return record.Process{}, fmt.Errorf("%w: environment variable name %q", ErrInvalid, k)
		}
	}
	if sp.Binding == nil {
		return record.Process{}, fmt.Errorf("%w: shell process without a binding", ErrInvalid)
	}
	dir, err := workDir(sp)
	if err != nil {
		return record.Process{}, err
	}
	hostDir, err := dir.HostDir()
	if err != nil {
		return record.Process{}, err
	}
	rec.MountID = dir.MountID()
	rec.Spec = record.ProcessSpec{Command: sp.Command, Mount: rec.MountID, Cwd: dir.String(), Env: sp.Env, PTY: sp.PTY}

	p := m.newProc(rec)
	if err := m.register(p); err != nil {
		return record.Process{}, err
	}
	fail := func(err error) (record.Process, error) {
		if p.sandbox != nil {
			p.sandbox.Close() // the TMPDIR and the helper's pipe, when the start failed
		}
		m.mu.Lock()
		delete(m.live, p.id)
		m.mu.Unlock()
		m.wg.Done()
		return record.Process{}, err
	}
	cmd := &exec.Cmd{
		Path: m.cfg.Shell,
		Args: []string{"sh", "-c", sp.Command},
		Dir:  hostDir,
		Env:  append(m.shellEnv(rec.ID, hostDir, sp.Env), sp.Binding.ShellVars()...),
	}
	// The shell (or what contains it under the sandbox, whose group the
	// shell shares or which forwards signals to it) leads its own group:
	// Setpgid, or Setsid for a pty.
	cmd.SysProcAttr = groupAttr()
	if sp.PTY {
		cmd.SysProcAttr = ptyAttr()
	}
	start := cmd.Start
	if m.cfg.Sandbox != nil {
		// The process outlives the request: no context may kill it.
		sc, err := sandbox.Command(context.Background(), sandbox.ForBinding(*m.cfg.Sandbox, sp.Binding), m.cfg.Shell, "-c", sp.Command)
		if err != nil {
			return fail(fmt.Errorf("process %s: %w", rec.ID, err))
		}
		sc.Dir, sc.Env, sc.SysProcAttr = cmd.Dir, cmd.Env, cmd.SysProcAttr
		// Only the sandbox's Start may start it: it confines the shell
		// from a thread of its own.
		p.sandbox, cmd, start = sc, sc.Cmd, sc.Start
	}
	var readers []streamReader
	var closeAfterStart []*os.File
	if sp.PTY {
		f, tty, err := pty.Open()
		if err != nil {
			return fail(fmt.Errorf("process %s: opening a pty: %w", rec.ID, err))
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		err = start()
		tty.Close()
		if err != nil {
			f.Close()
			return fail(fmt.Errorf("process %s: starting %s on a pty: %w", rec.ID, m.cfg.Shell, err))
		}
		p.pty, p.stdin = f, f
		readers = []streamReader{{PTYStream, f}}
	} else {
		inR, inW, err := os.Pipe()
		if err != nil {
			return fail(fmt.Errorf("process %s: %w", rec.ID, err))
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			return fail(fmt.Errorf("process %s: %w", rec.ID, err))
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			outR.Close()
			outW.Close()
			return fail(fmt.Errorf("process %s: %w", rec.ID, err))
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		closeAfterStart = []*os.File{inR, outW, errW}
		err = start()
		for _, f := range closeAfterStart {
			f.Close()
		}
		if err != nil {
			inW.Close()
			outR.Close()
			errR.Close()
			return fail(fmt.Errorf("process %s: starting %s: %w", rec.ID, m.cfg.Shell, err))
		}
		p.stdin = inW
		readers = []streamReader{{Stdout, outR}, {Stderr, errR}}
	}
	p.cmd = cmd
	pid := cmd.Process.Pid
	err = p.append(ctx, []record.ProcessEvent{newEvent(EventStarted, StartedData{
		Kind: rec.Kind, Spec: rec.Spec, Disposition: rec.Disposition, CreatedBy: rec.CreatedBy,
		SessionID: rec.SessionID, RunID: rec.RunID, Pid: pid, Pgid: pid,
	})}, func(r *record.Process) { r.Pgid = pid })
	if err != nil {
		p.kill()
		p.wait()
		for _, r := range readers {
			r.f.Close()
		}
		if p.stdin != nil && p.stdin != p.pty {
			p.stdin.Close()
		}
		return fail(err)
	}
	out, _ := p.snapshot()
	go p.superviseShell(readers)
	return out, nil
}

// wait waits for a started shell (through the sandbox Cmd, which also
// removes its TMPDIR).
func (p *proc) wait() error {
	if p.sandbox != nil {
		return p.sandbox.Wait()
	}
	return p.cmd.Wait()
}

// kill ends a started shell for good: its whole tree under the sandbox,
// else its process group.
func (p *proc) kill() {
	if p.sandbox != nil {
		p.sandbox.Kill()
		return
	}
	killGroup(p.cmd.Process.Pid)
}

// signal sends sig to a started shell's group: the group it leads, or
// under the sandbox the group of the process that contains the shell
// (the init shell's, which the shell shares, or the helper's, which
// forwards it to the shell's group). SIGKILL ends the whole tree instead.
func (p *proc) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		p.kill()
		return
	}
	signalGroup(p.cmd.Process.Pid, sig)
}

type streamReader struct {
	stream string
	f      *os.File
}

type piece struct {
	stream string
	data   []byte
}

// superviseShell owns a shell process: it captures the output, reaps the
// shell, kills what is left of its group and writes the terminal event.
func (p *proc) superviseShell(readers []streamReader) {
	m := p.m
	defer m.wg.Done()
	pieces := make(chan piece, 8) // bounded: a fast writer blocks on its pipe
	readDone := make(chan struct{})
	bufSize := min(32<<10, m.cfg.ChunkBytes)
	go func() {
		defer close(pieces)
		errs := make(chan struct{}, len(readers))
		for _, r := range readers {
			go func() {
				defer func() { errs <- struct{}{} }()
				for {
					buf := make([]byte, bufSize)
					n, err := r.f.Read(buf)
					if n > 0 {
						pieces <- piece{r.stream, buf[:n]}
					}
					if err != nil {
						return
					}
				}
			}()
		}
		for range readers {
			<-errs
		}
		close(readDone)
	}()
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		p.collect(pieces)
	}()

	werr := p.wait()
	if p.sandbox == nil {
		// Whatever is left of the group (background jobs) ends with the
		// shell. Under the helper nothing is left: it killed the tree
		// before it exited.
		killGroup(p.cmd.Process.Pid)
	}
	if p.stdin != nil && p.stdin != p.pty {
		p.stdin.Close()
	}
	// A process that left the group could hold the pipes open forever:
	// stop reading after the grace period.
	select {
	case <-readDone:
	case <-time.After(m.cfg.KillGrace):
		for _, r := range readers {
			r.f.SetReadDeadline(time.Now())
		}
	}
	<-collected
	for _, r := range readers {
		r.f.Close()
	}

	p.mu.Lock()
	closing, cancelq := p.closing, p.cancelq
	p.mu.Unlock()
	d := EndedData{}
	var exit *int
	if st := p.cmd.ProcessState; st != nil {
		c := st.ExitCode()
		exit = &c
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			d.Signal = signalName(ws.Signal())
		}
	} else if werr != nil {
		d.Error = werr.Error()
	}
	d.ExitCode = exit
	var limited bool
	if p.sandbox != nil {
		if l := p.sandbox.Exceeded(); l != nil {
			limited = true
			d.Failure = &event.ToolFailure{Kind: event.FailureResourceLimit, Limit: l.Limit, Scope: l.Scope}
			d.LimitMessage = l.Error()
		}
	}
	status := record.ProcessCompleted
	switch {
	case cancelq != nil:
		status, d.Cancel = record.ProcessCancelled, cancelq
	case closing:
		status = record.ProcessAbandoned
		d.Evidence = &Evidence{Writer: "close", Reason: "the host shut down and killed the process tree", Pgid: p.cmd.Process.Pid}
	case exit == nil || *exit != 0 || limited:
		status = record.ProcessFailed
	}
	_, ok := p.end(status, d, exit)
	m.finish(p, ok)
}

// collect turns pieces into output events: a chunk is flushed when it
// reaches ChunkBytes, when the stream changes, or FlushInterval after its
// first byte. An incomplete UTF-8 sequence at the end of a chunk waits for
// the next piece of the same stream, and so does an end that may begin a
// secret (Config.Redactor), unless nothing followed it for maxHold. While
// the store refuses writes, it retries the held output when its backoff
// has passed.
func (p *proc) collect(pieces <-chan piece) {
	m := p.m
	var cur string
	var buf []byte
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	retrying := false
	rearm := func(d time.Duration, held bool) {
		if held && !retrying {
			retry.Reset(d)
			retrying = true
		}
	}
	var heldAt time.Time // when buf began to hold only what a flush kept back
	flush := func(final bool) {
		if len(buf) == 0 {
			return
		}
		n := len(buf)
		if !final {
			n = completeUTF8(buf)
			if n == 0 {
				n = len(buf)
			}
			n = min(n, len(buf)-m.cfg.Redactor.Hold(buf))
		}
		if n > 0 {
			p.writeOutput(cur, buf[:n])
		}
		buf = append(buf[:0], buf[n:]...)
		switch {
		case len(buf) == 0:
			heldAt = time.Time{}
		case heldAt.IsZero():
			heldAt = time.Now()
		}
		p.mu.Lock()
		d, held := p.box.retryIn(time.Now())
		p.mu.Unlock()
		rearm(d, held)
	}
	for {
		select {
		case pc, ok := <-pieces:
			if !ok {
				flush(true)
				timer.Stop()
				retry.Stop()
				return
			}
			if pc.stream != cur {
				flush(true)
				cur = pc.stream
			}
			buf = append(buf, pc.data...)
			heldAt = time.Time{}
			if len(buf) >= m.cfg.ChunkBytes {
				flush(false)
			}
			if len(buf) > 0 && !armed {
				timer.Reset(m.cfg.FlushInterval)
				armed = true
			}
		case <-timer.C:
			armed = false
			flush(!heldAt.IsZero() && time.Since(heldAt) >= maxHold)
			if len(buf) > 0 {
				timer.Reset(m.cfg.FlushInterval)
				armed = true
			}
		case <-retry.C:
			retrying = false
			rearm(p.retry())
		}
	}
}

// maxHold is how long output that may begin a secret waits for what
// follows it before it is stored as it is.
const maxHold = time.Second

// completeUTF8 returns the length of b without a trailing incomplete
// UTF-8 sequence (at most 3 bytes are held back).
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// startTool registers a tool process (or, with reason set, restarts one
// found by Recover) and runs it on a goroutine.
func (m *Manager) startTool(ctx context.Context, rec record.Process, reason string) (record.Process, error) {
	p := m.newProc(rec)
	if err := m.register(p); err != nil {
		return record.Process{}, err
	}
	var ev record.ProcessEvent
	if reason == "" {
		ev = newEvent(EventStarted, StartedData{Kind: rec.Kind, Spec: rec.Spec, Disposition: rec.Disposition,
			CreatedBy: rec.CreatedBy, SessionID: rec.SessionID, RunID: rec.RunID})
	} else {
		ev = newEvent(EventRestarted, RestartedData{Reason: reason})
	}
	if err := p.append(ctx, []record.ProcessEvent{ev}, nil); err != nil {
		m.mu.Lock()
		delete(m.live, p.id)
		m.mu.Unlock()
		m.wg.Done()
		return record.Process{}, err
	}
	tctx, stop := context.WithCancelCause(m.ctx)
	p.mu.Lock()
	p.stopTool = stop
	out := p.rec
	p.mu.Unlock()
	if rec.Kind == record.ProcessAgent {
		go p.superviseAgent(tctx, stop, reason != "")
	} else {
		go p.superviseTool(tctx, stop)
	}
	return out, nil
}

// superviseAgent owns a subagent process: it runs the child through the
// AgentRunner, which streams the child's answer into the output, and
// writes the terminal event: completed with the answer, failed or
// cancelled with the child's typed failure.
func (p *proc) superviseAgent(ctx context.Context, stop context.CancelCauseFunc, restarted bool) {
	m := p.m
	defer m.wg.Done()
	defer stop(nil)
	rec, _ := p.snapshot()
	r, _ := m.hooks.Load().tools.(AgentRunner)
	res := runAgent(ctx, r, AgentRun{
		Process: rec, Restarted: restarted,
		Output: func(text string) {
			if text != "" {
				p.writeOutput(AgentStream, []byte(text))
			}
		},
		Started: func(ctx context.Context, runID string) error {
			ev := newEvent(EventAgentRun, AgentRunData{SessionID: rec.Spec.Agent.SessionID, RunID: runID})
			return p.append(ctx, []record.ProcessEvent{ev}, func(r *record.Process) {
				a := *r.Spec.Agent
				a.RunID = runID
				r.Spec.Agent = &a
			})
		},
	})
	p.mu.Lock()
	closing, cancelq := p.closing, p.cancelq
	p.mu.Unlock()
	if closing && cancelq == nil {
		// Left running: the next host's Recover follows the child again.
		m.finish(p, false)
		return
	}
	d := EndedData{Output: res.Answer, Failure: res.Failure, IsError: res.Failure != nil}
	status := record.ProcessCompleted
	switch {
	case cancelq != nil:
		status, d.Cancel = record.ProcessCancelled, cancelq
		if d.Failure == nil {
			d.Failure = &event.ToolFailure{Kind: event.FailureSubagentCancelled}
		}
	case res.Failure != nil && res.Failure.Kind == event.FailureSubagentCancelled:
		status = record.ProcessCancelled
	case res.Failure != nil:
		status = record.ProcessFailed
	}
	p.mu.Lock()
	p.rec.Failure, p.rec.Result = d.Failure, res.Answer
	p.mu.Unlock()
	_, ok := p.end(status, d, nil)
	m.finish(p, ok)
}

func runAgent(ctx context.Context, r AgentRunner, run AgentRun) (res AgentResult) {
	defer func() {
		if v := recover(); v != nil {
			res = AgentResult{Failure: &event.ToolFailure{Kind: event.FailureSubagentFailed, Message: fmt.Sprintf("internal error (panic: %v)", v)}}
		}
	}()
	if r == nil {
		return AgentResult{Failure: &event.ToolFailure{Kind: event.FailureSubagentFailed, Message: "subagents are not configured"}}
	}
	return r.RunAgent(ctx, run)
}

func (p *proc) superviseTool(ctx context.Context, stop context.CancelCauseFunc) {
	m := p.m
	defer m.wg.Done()
	defer stop(nil)
	rec, _ := p.snapshot()
	call := &tool.Call{ID: rec.ID, SessionID: rec.SessionID, RunID: rec.RunID, Arguments: rec.Spec.Args}
	res := runTool(ctx, m.hooks.Load().tools, ToolRun{Process: rec, Call: call})
	p.mu.Lock()
	closing, cancelq := p.closing, p.cancelq
	p.mu.Unlock()
	if closing && cancelq == nil && rec.Disposition != record.OwnerBound {
		// Left running for the next host's Recover.
		m.finish(p, false)
		return
	}
	if res.Output != "" {
		p.writeOutput(ResultStream, []byte(res.Output))
	}
	d := EndedData{Output: res.Output, IsError: res.IsError}
	status := record.ProcessCompleted
	switch {
	case cancelq != nil:
		status, d.Cancel = record.ProcessCancelled, cancelq
	case closing:
		status = record.ProcessAbandoned
		d.Evidence = &Evidence{Writer: "close", Reason: "the host shut down and cancelled the tool call"}
	case res.IsError:
		status = record.ProcessFailed
	}
	_, ok := p.end(status, d, nil)
	m.finish(p, ok)
}

func runTool(ctx context.Context, r ToolRunner, run ToolRun) (res tool.Result) {
	defer func() {
		if v := recover(); v != nil {
			res = tool.Result{Output: fmt.Sprintf("tool %q failed: internal error (panic: %v)\n%s", run.Process.Spec.Tool, v, debug.Stack()), IsError: true}
		}
	}()
	return r.RunTool(ctx, run)
}

// excerpt returns the output of rec for [Manager.Await] in about n
// bytes: all of it when it fits, else its first quarter (head) and its
// last three quarters (tail) with the count of the bytes between them,
// which are read from tailOffset-omitted with [Manager.Output].
func (m *Manager) excerpt(ctx context.Context, rec record.Process, n int) (res api.AwaitResult, err error) {
	start := max(rec.OutputBytes-int64(n), 0)
	var head api.Output
	if start > 0 {
		if head, err = m.output(ctx, rec, 0, n/4); err != nil {
			return res, err
		}
		start = max(start+int64(n/4), head.Next) // the tail is the rest of n
		res.Head = Text(head)
		if head.Truncated {
			res.Head = fmt.Sprintf("[output before offset %d was dropped by the size cap]\n", head.Offset) + res.Head
		}
		res.Omitted = start - head.Next
	}
	tail, err := m.output(ctx, rec, start, n)
	if err != nil {
		return res, err
	}
	res.TailOffset, res.Tail = tail.Offset, Text(tail)
	if res.Head != "" && res.Omitted == 0 {
		// The two reads met: one text.
		res.Tail, res.Head, res.TailOffset = res.Head+res.Tail, "", head.Offset
	}
	return res, nil
}
