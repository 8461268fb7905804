package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
	"weft.dev/weft/tool"
)

// RegisterTools adds the model's process tools to reg, working on m:
// process_await, process_output, process_signal, process_cancel,
// process_list and start_tool (which validates a call with reg's schema
// for that tool before registering the process; an MCP server's tool,
// mcp__…, which reg does not hold, is checked when it runs). The caller of each tool
// is the call's session and run. Handles are the objects
// {"__handle__":"process","id":…}; a bad handle or a process the caller
// cannot address is an error result. It fails if a name is taken.
func RegisterTools(reg *tool.Registry, m *Manager) error {
	t := &tools{reg: reg, m: m}
	var errs []error
	add := func(tl tool.Tool, err error) {
		if err == nil {
			err = reg.Add(tl)
		}
		errs = append(errs, err)
	}
	add(tool.Func("process_await", "Wait for a background process to end, up to timeoutMs (default 30000, at most 600000). "+
		"Returns its final status, exit code, output size and the end of its output (and its beginning, when it is long), or says it is still running.", t.await))
	add(tool.Func("process_output", "Read a background process's output (stdout and stderr combined) from a byte offset. "+
		"Returns the text, the offset to read from next and how the process ended; output dropped by the size cap or lost is reported where it was.", t.output))
	add(tool.Func("process_signal", "Send a named signal with an optional JSON payload to a background process. "+
		"For shell processes the names interrupt, terminate, kill and hangup also send SIGINT, SIGTERM, SIGKILL or SIGHUP.", t.signal))
	add(tool.Func("process_cancel", "Cancel a background process: a shell's process group is terminated, a tool call is cancelled. Waits until it has ended.", t.cancel))
	add(tool.Func("process_list", "List the background processes of this session (and those granted to it).", t.list))
	add(tool.Func("start_tool", "Start any tool call in the background and return its process handle at once. "+
		"Use process_await or process_output with the handle to get its result.", t.startTool))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("process tools: %w", err)
	}
	return nil
}

type tools struct {
	reg *tool.Registry
	m   *Manager
}

func callerOf(c *tool.Call) Caller { return Caller{SessionID: c.SessionID, RunID: c.RunID} }

func parseHandleArg(h map[string]any) (api.Handle, error) {
	raw, err := json.Marshal(h)
	if err != nil {
		return api.Handle{}, err
	}
	return api.ParseHandle(raw)
}

// jsonResult renders v as indented JSON for the model, without HTML
// escapes (a command's ">&2" stays readable).
func jsonResult(v any) (tool.Result, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: strings.TrimSuffix(b.String(), "\n")}, nil
}

// summary is what the model sees of a process.
type summary struct {
	Handle    api.Handle `json:"handle"`
	Kind      string     `json:"kind"`
	Status    string     `json:"status"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	Command   string     `json:"command,omitempty"`
	Tool      string     `json:"tool,omitempty"`
	StartedAt string     `json:"startedAt"`
	Output    int64      `json:"outputBytes"`
	Dropped   int64      `json:"droppedBytes,omitempty"`
	Lost      int64      `json:"lostBytes,omitempty"`
	// Session is a subagent's child session.
	Session string             `json:"childSessionId,omitempty"`
	Failure *event.ToolFailure `json:"failure,omitempty"`
	// Result is a subagent's final answer.
	Result string `json:"result,omitempty"`
}

func summarize(p record.Process) summary {
	s := summary{Handle: api.Handle{ID: p.ID}, Kind: p.Kind, Status: p.Status, ExitCode: p.ExitCode,
		Command: p.Spec.Command, Tool: p.Spec.Tool, StartedAt: p.StartedAt.Format(time.RFC3339), Output: p.OutputBytes,
		Dropped: p.DroppedBytes, Lost: p.LostBytes, Failure: p.Failure, Result: p.Result}
	if p.Spec.Agent != nil {
		s.Session = p.Spec.Agent.SessionID
	}
	return s
}

type awaitArgs struct {
	Handle    map[string]any `json:"handle" jsonschema:"the process handle {\"__handle__\":\"process\",\"id\":…}"`
	TimeoutMs int            `json:"timeoutMs,omitempty" jsonschema:"how long to wait in milliseconds (default 30000, at most 600000)"`
}

func (t *tools) await(ctx context.Context, c *tool.Call, in awaitArgs) (tool.Result, error) {
	h, err := parseHandleArg(in.Handle)
	if err != nil {
		return tool.Result{}, err
	}
	timeout := 30 * time.Second
	if in.TimeoutMs > 0 {
		timeout = min(time.Duration(in.TimeoutMs)*time.Millisecond, 10*time.Minute)
	}
	res, err := t.m.Await(ctx, h.ID, timeout, callerOf(c))
	if err != nil {
		return tool.Result{}, err
	}
	out := struct {
		summary
		Note    string `json:"note,omitempty"`
		Head    string `json:"head,omitempty"`
		Omitted string `json:"omitted,omitempty"`
		Tail    string `json:"tail"`
	}{summary: summarize(res.Process), Head: res.Head, Tail: res.Tail}
	if res.TimedOut {
		out.Note = fmt.Sprintf("still running after %v", timeout)
	}
	if res.Omitted > 0 {
		from := res.TailOffset - res.Omitted
		out.Omitted = fmt.Sprintf("[... %d bytes omitted between head and tail (offsets %d..%d of %d): read them with process_output from offset %d ...]",
			res.Omitted, from, res.TailOffset, res.Process.OutputBytes, from)
	}
	return jsonResult(out)
}

type outputArgs struct {
	Handle map[string]any `json:"handle" jsonschema:"the process handle"`
	Offset int64          `json:"offset,omitempty" jsonschema:"the byte offset to read from (default 0)"`
	Limit  int            `json:"limit,omitempty" jsonschema:"the most bytes to return (default and maximum 32768)"`
}

func (t *tools) output(ctx context.Context, c *tool.Call, in outputArgs) (tool.Result, error) {
	h, err := parseHandleArg(in.Handle)
	if err != nil {
		return tool.Result{}, err
	}
	limit := 32 << 10
	if in.Limit > 0 {
		limit = min(in.Limit, limit)
	}
	out, err := t.m.Output(ctx, h.ID, in.Offset, limit, callerOf(c))
	if err != nil {
		return tool.Result{}, err
	}
	rec, err := t.m.Get(ctx, h.ID, callerOf(c))
	if err != nil {
		return tool.Result{}, err
	}
	var b strings.Builder
	if out.Truncated {
		fmt.Fprintf(&b, "[output before offset %d was dropped by the size cap; reading from %d]\n", out.Offset, out.Offset)
	}
	text := Text(out)
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[bytes %d..%d of %d", out.Offset, out.Next, max(out.Total, rec.OutputBytes))
	if out.Lost > 0 {
		fmt.Fprintf(&b, ", %d of them lost (marked above)", out.Lost)
	}
	if rest := rec.OutputBytes - out.Next; rest > 0 {
		fmt.Fprintf(&b, "; %d more bytes: read on from offset %d", rest, out.Next)
		if rest > int64(limit) {
			fmt.Fprintf(&b, ", or the last ones from offset %d", rec.OutputBytes-int64(limit))
		}
	}
	switch {
	case !record.IsProcessTerminal(rec.Status):
		b.WriteString("; the process is running, more may follow]")
	case rec.ExitCode != nil:
		fmt.Fprintf(&b, "; the process has ended: %s, exit code %d]", rec.Status, *rec.ExitCode)
	default:
		fmt.Fprintf(&b, "; the process has ended: %s]", rec.Status)
	}
	return tool.Result{Output: b.String()}, nil
}

type signalArgs struct {
	Handle  map[string]any `json:"handle" jsonschema:"the process handle"`
	Name    string         `json:"name" jsonschema:"the signal name, e.g. interrupt, terminate, or any [a-z0-9_.-] name"`
	Payload any            `json:"payload,omitempty" jsonschema:"an optional JSON payload"`
}

func (t *tools) signal(ctx context.Context, c *tool.Call, in signalArgs) (tool.Result, error) {
	h, err := parseHandleArg(in.Handle)
	if err != nil {
		return tool.Result{}, err
	}
	var payload json.RawMessage
	if in.Payload != nil {
		if payload, err = json.Marshal(in.Payload); err != nil {
			return tool.Result{}, err
		}
	}
	seq, err := t.m.Signal(ctx, h.ID, in.Name, payload, callerOf(c))
	if err != nil {
		return tool.Result{}, err
	}
	return jsonResult(map[string]any{"processId": h.ID, "sequence": seq, "signal": in.Name})
}

type cancelArgs struct {
	Handle map[string]any `json:"handle" jsonschema:"the process handle"`
	Reason string         `json:"reason,omitempty" jsonschema:"why, for the record"`
}

func (t *tools) cancel(ctx context.Context, c *tool.Call, in cancelArgs) (tool.Result, error) {
	h, err := parseHandleArg(in.Handle)
	if err != nil {
		return tool.Result{}, err
	}
	p, err := t.m.Cancel(ctx, h.ID, in.Reason, callerOf(c))
	if err != nil {
		return tool.Result{}, err
	}
	return jsonResult(summarize(p))
}

type listArgs struct {
	Status string `json:"status,omitempty" jsonschema:"keep only processes with this status (running, completed, failed, cancelled, abandoned)"`
}

func (t *tools) list(ctx context.Context, c *tool.Call, in listArgs) (tool.Result, error) {
	var st []string
	if in.Status != "" {
		st = []string{in.Status}
	}
	ps, err := t.m.List(ctx, ListParams{Statuses: st, Limit: 200}, callerOf(c))
	if err != nil {
		return tool.Result{}, err
	}
	out := make([]summary, len(ps))
	for i, p := range ps {
		out[i] = summarize(p)
	}
	return jsonResult(out)
}

type startToolArgs struct {
	Tool       string         `json:"tool" jsonschema:"the name of the tool to run in the background"`
	Args       map[string]any `json:"args,omitempty" jsonschema:"the tool's arguments"`
	Rerunnable bool           `json:"rerunnable,omitempty" jsonschema:"set only if the call is safe to run again after a host crash"`
	WakeOnExit bool           `json:"wakeOnExit,omitempty" jsonschema:"start a new run of this session when the call ends"`
}

func (t *tools) startTool(ctx context.Context, c *tool.Call, in startToolArgs) (tool.Result, error) {
	switch in.Tool {
	case "start_tool", "process_await", "process_output", "process_signal", "process_cancel", "process_list", "spawn_agent":
		return tool.Result{}, fmt.Errorf("%s cannot be started in the background", in.Tool)
	}
	raw, err := json.Marshal(in.Args)
	if err != nil {
		return tool.Result{}, err
	}
	if in.Args == nil {
		raw = json.RawMessage(`{}`)
	}
	args, err := t.reg.Validate(in.Tool, raw)
	if _, known := t.reg.Lookup(in.Tool); !known && strings.HasPrefix(in.Tool, "mcp__") {
		// An MCP server's tool is not in the host's registry: the host
		// finds it (starting its server) when the process runs, and
		// checks the arguments against its schema then.
		args, err = raw, nil
	}
	if err != nil {
		return tool.Result{}, err
	}
	disp := record.OwnerBound
	if in.Rerunnable {
		disp = record.Rerunnable
	}
	if c.Background == nil {
		return tool.Result{}, errors.New("background processes are not available here")
	}
	p, err := c.Background.StartProcess(ctx, c, tool.BackgroundRequest{
		Kind: record.ProcessTool, Tool: in.Tool, Args: args,
		Disposition: disp, WakeOnExit: in.WakeOnExit, CreatedBy: "tool:start_tool",
	})
	if err != nil {
		return tool.Result{}, err
	}
	return jsonResult(map[string]any{"handle": api.Handle{ID: p.ID}, "status": p.Status, "tool": in.Tool})
}

// BackgroundShell starts the shell tool's background commands as shell
// processes through the calling session's owner ([tool.Call.Background]).
// It satisfies builtin.BackgroundStarter: set builtin.Options.Background to
// process.BackgroundShell{}. Safe for concurrent use.
type BackgroundShell struct{}

// StartShell starts command in cwd as an owner_bound shell process with
// an ID of its own, and returns its handle at once.
func (BackgroundShell) StartShell(ctx context.Context, call *tool.Call, command, cwd string) (tool.Result, error) {
	if call.Background == nil {
		return tool.Result{}, errors.New("background shells are not available here")
	}
	p, err := call.Background.StartProcess(ctx, call, tool.BackgroundRequest{
		Kind: record.ProcessShell, Command: command, Cwd: cwd, Disposition: record.OwnerBound, CreatedBy: "tool:shell",
	})
	if err != nil {
		return tool.Result{}, err
	}
	return jsonResult(map[string]any{"handle": api.Handle{ID: p.ID}, "status": p.Status,
		"note": "running in the background; use process_await, process_output, process_signal or process_cancel with the handle"})
}
