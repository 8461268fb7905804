package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/tool"
)

func (t *tools) shellDesc() string {
	return t.shellDescBase() + t.sandboxDesc()
}

func (t *tools) shellDescBase() string {
	return fmt.Sprintf("Run a shell command (%s -c) in the foreground and return its combined stdout and stderr and its exit code. "+
		"It starts in the shell mount's directory unless cwd names another directory in a read-write mount. "+
		"timeout is in seconds (default %d, at most %d); on timeout the command and everything it started are killed. "+
		"Background jobs (cmd &) do not outlive the call. The result always ends with the exit code; "+
		"output beyond %d bytes keeps its beginning and end and says how much was left out.",
		t.opts.Shell, int(t.opts.ShellTimeout.Seconds()), int(t.opts.ShellMaxTimeout.Seconds()), t.opts.ShellOutputCap)
}

// sandboxDesc tells the model what a sandboxed command can reach, so a
// refused access is no surprise.
func (t *tools) sandboxDesc() string {
	if t.opts.Sandbox == nil || t.opts.Sandbox.Unsandboxed {
		return ""
	}
	st := t.opts.Sandbox.Confinement()
	if st.ABI == 0 {
		return " Commands are refused on this host: its kernel has no Landlock sandbox."
	}
	net := "the network is allowed"
	switch {
	case st.Network == sandbox.NetworkAllow:
	case st.UDPDenied:
		net = "network access is denied"
	case st.TCPDenied:
		net = "TCP connections are denied"
	default:
		net = "the network is not restricted"
	}
	limits := ""
	if !st.Limits.IsZero() {
		// What a runaway command runs into: the model can tell a limit
		// from a bug when a result says resource_limit.
		limits = " Each command's limits: " + st.Limits.String() + "."
	}
	return " Commands run in a sandbox: they may write only in read-write mounts and $TMPDIR (private, deleted after the call), " +
		"and read read-only mounts and system directories (/usr, /bin, /lib, /etc); everything else, /tmp and /proc included, is refused; " + net + "." + limits
}

type shellArgs struct {
	Command string `json:"command" jsonschema:"the shell command line"`
	Timeout int    `json:"timeout,omitempty" jsonschema:"timeout in seconds (see the tool description for the default and maximum)"`
	Cwd     string `json:"cwd,omitempty" jsonschema:"the working directory, in a read-write mount (default: the shell mount's root)"`
	// Background hands the command to Options.Background (see
	// [BackgroundStarter]).
	Background bool `json:"background,omitempty" jsonschema:"run in the background and return a process handle at once (timeout does not apply)"`
}

// BackgroundStarter starts a shell command in the background for the
// shell tool's background option and returns the result the model sees
// (the process handle). StartShell must resolve cwd through call.Env during
// the call and not keep call.Env. The weft host sets
// process.BackgroundShell.
type BackgroundStarter interface {
	StartShell(ctx context.Context, call *tool.Call, command, cwd string) (tool.Result, error)
}

// shell runs a command in its own process group.
//
// The environment is an allow-list, not the host's: PATH (Options.ShellPath),
// HOME (the working directory), LANG=C.UTF-8, TERM=dumb, then
// Options.ShellEnv, and under a sandbox TMPDIR. Stdin is empty. The
// working directory is resolved through the binding for Write, then
// [env.Path.HostDir]: the resolver does not confine the command; with
// Options.Sandbox set, Landlock does (see package sandbox), with the
// call's mounts as the policy.
//
// With Options.Sandbox set, the command runs under the sandbox helper,
// which contains everything it starts (see [sandbox.Cmd]): nothing
// outlives the call, processes that left the group (setsid, double
// forks) included, and a host that dies takes the tree with it. When the
// command times out or ctx is cancelled, the shell's group gets SIGTERM
// (through the helper), then the whole tree SIGKILL after
// Options.ShellKillGrace; when the shell exits, the helper kills what it
// left. Without a sandbox configuration the same happens to the shell's
// process group only. The call returns only after the shell has been
// reaped. A non-zero exit is reported in the output, not as an error
// result; a timeout or a failure to start is an error result. A command
// over api.MaxShellCommandBytes is refused with an invalid_params
// *api.Error before anything runs.
func (t *tools) shell(ctx context.Context, call *tool.Call, in shellArgs) (tool.Result, error) {
	if strings.TrimSpace(in.Command) == "" {
		return tool.Result{}, errors.New("command is empty")
	}
	if len(in.Command) > api.MaxShellCommandBytes {
		return tool.Result{}, api.Errorf(api.KindInvalidParams, "command: %d bytes, more than %d; write a long script to a file first",
			len(in.Command), api.MaxShellCommandBytes).With("field", "command").With("limit", api.MaxShellCommandBytes)
	}
	if in.Background {
		if t.opts.Background == nil {
			return tool.Result{}, errors.New("background shell commands are not available here")
		}
		return t.opts.Background.StartShell(ctx, call, in.Command, in.Cwd)
	}
	timeout := t.opts.ShellTimeout
	switch {
	case in.Timeout < 0:
		return tool.Result{}, errors.New("timeout must not be negative")
	case in.Timeout > 0:
		timeout = min(time.Duration(in.Timeout)*time.Second, t.opts.ShellMaxTimeout)
	}
	if _, ok := call.Env.ShellMount(); !ok {
		return tool.Result{}, errors.New("no read-write mount is available for shell commands")
	}
	var dir *env.Path
	var err error
	if in.Cwd != "" {
		dir, err = call.Env.Resolve(in.Cwd, env.Write)
	} else {
		dir, err = call.Env.ShellDir()
	}
	if err != nil {
		return tool.Result{}, err
	}
	hostDir, err := dir.HostDir()
	if err != nil {
		return tool.Result{}, err
	}

	// The output fits the caller's budget with room for what follows it,
	// so that nothing cuts the end off: the last lines and the exit code.
	limit := t.opts.ShellOutputCap
	if call.ResultBudget > 0 {
		limit = max(min(limit, call.ResultBudget-shellTrailerRoom), minShellOutput)
	}
	out := &capWriter{cap: limit}
	end, err := t.runShell(ctx, call.Env, in.Command, hostDir, timeout, out)
	if err != nil {
		return tool.Result{}, err
	}
	text := out.String()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	res := tool.Result{Output: text, Confinement: end.confinement}
	if end.warning != "" {
		res.Output += "[sandbox: " + end.warning + "]\n"
	}
	if l := end.limit; l != nil {
		// A typed failure, whatever the exit code: a program may report
		// EFBIG and exit 1, or a shell go on after its child was killed.
		res.Output += "[" + l.Error() + "]\n"
		res.IsError = true
		res.Failure = &event.ToolFailure{Kind: event.FailureResourceLimit, Limit: l.Limit, Scope: l.Scope}
	}
	switch end.status {
	case timedOut:
		res.Output += fmt.Sprintf("[timed out after %v; the command and its children were killed]\n", timeout)
		res.IsError = true
	case cancelled:
		res.Output += "[cancelled; the command and its children were killed]\n"
		res.IsError = true
	}
	if end.signal != "" {
		res.Output += fmt.Sprintf("[exit code %d: killed by %s]", end.code, end.signal)
	} else {
		res.Output += fmt.Sprintf("[exit code %d]", end.code)
	}
	return res, nil
}

// shellTrailerRoom is the room kept in the caller's budget for what
// follows a command's output: the note of what was left out, a sandbox
// warning, how the command was stopped and its exit code.
const shellTrailerRoom = 1 << 10

// minShellOutput is the least output a result keeps (its head and tail),
// however small the budget.
const minShellOutput = 256

// shellEnd is how a command ended.
type shellEnd struct {
	// code is the exit code: -1 when a signal killed the shell (signal
	// names it); under the helper, 128+n when the shell was.
	code   int
	signal string
	status runStatus
	// warning is what the sandbox could not enforce.
	warning string
	// limit is the resource limit the command ran into, if any;
	// confinement says what held it (sandbox.Status).
	limit       *sandbox.LimitError
	confinement string
}

type runStatus int

const (
	exited runStatus = iota
	timedOut
	cancelled
)

// runShell runs command and returns how it ended. It returns after the
// shell has been reaped and the output pipe drained (or abandoned after
// the grace period, if a process that left the group still holds it). A
// sandbox refusal is returned as is.
func (t *tools) runShell(ctx context.Context, b *env.Binding, command, dir string, timeout time.Duration, out io.Writer) (shellEnd, error) {
	var (
		cmd     *exec.Cmd
		start   func() error
		wait    func() error
		kill    func() // ends what start started, for good
		warning string
		sc      *sandbox.Cmd
	)
	if t.opts.Sandbox == nil {
		cmd = &exec.Cmd{Path: t.opts.Shell, Args: []string{"sh", "-c", command}}
		start, wait = cmd.Start, cmd.Wait
		kill = func() { signalGroup(cmd.Process, syscall.SIGKILL) }
	} else {
		// The command is stopped below (SIGTERM, grace, Kill), not by ctx.
		var err error
		sc, err = sandbox.Command(context.WithoutCancel(ctx), sandbox.ForBinding(*t.opts.Sandbox, b), t.opts.Shell, "-c", command)
		if err != nil {
			return shellEnd{}, err
		}
		cmd, start, wait, warning = sc.Cmd, sc.Start, sc.Wait, sc.Status.Warning()
		kill = func() { sc.Kill() }
	}
	cmd.Dir = dir
	cmd.Env = append(t.shellEnv(dir), b.ShellVars()...)
	cmd.SysProcAttr = newGroupAttr()

	pr, pw, err := os.Pipe()
	if err != nil {
		return shellEnd{}, fmt.Errorf("shell: %w", err)
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	err = start()
	pw.Close()
	if err != nil {
		return shellEnd{}, fmt.Errorf("shell: starting %s: %w", t.opts.Shell, err)
	}

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, pr)
	}()
	waited := make(chan error, 1)
	go func() { waited <- wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	status := exited
	var werr error
	select {
	case werr = <-waited:
	case <-timer.C:
		status = timedOut
	case <-ctx.Done():
		status = cancelled
	}
	if status != exited {
		// To the group the shell leads; under the helper, the helper's
		// group, and the helper forwards it to the shell's.
		signalGroup(cmd.Process, syscall.SIGTERM)
		grace := time.NewTimer(t.opts.ShellKillGrace)
		select {
		case werr = <-waited:
			grace.Stop()
		case <-grace.C:
			kill()
			werr = <-waited
		}
	}
	if t.opts.Sandbox == nil {
		// Whatever is left in the group (background jobs, or children
		// that ignored SIGTERM) does not outlive the call. Under the
		// helper nothing is left: it killed the tree before it exited.
		signalGroup(cmd.Process, syscall.SIGKILL)
	}

	// The pipe closes when the last holder exits; without the helper, a
	// process that left the group could hold it forever, so stop reading
	// after the grace period.
	pr.SetReadDeadline(time.Now().Add(t.opts.ShellKillGrace))
	<-copied

	end := shellEnd{code: -1, status: status, warning: warning}
	if sc != nil {
		end.limit, end.confinement = sc.Exceeded(), sc.Status.Confinement()
	}
	if st := cmd.ProcessState; st != nil {
		end.code, end.signal = st.ExitCode(), exitSignal(st)
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return shellEnd{}, fmt.Errorf("shell: %w", werr)
	}
	return end, nil
}

func (t *tools) shellEnv(dir string) []string {
	e := []string{
		"PATH=" + t.opts.ShellPath,
		"HOME=" + dir,
		"LANG=C.UTF-8",
		"TERM=dumb",
	}
	return append(e, t.opts.ShellEnv...)
}

// capWriter keeps the first and last cap/2 bytes written and counts the
// rest. Safe for concurrent use.
type capWriter struct {
	mu    sync.Mutex
	cap   int
	head  []byte
	tail  []byte // ring buffer of the last cap-cap/2 bytes
	start int    // index of the oldest byte in tail, once it is full
	total int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	w.total += int64(n)
	if room := w.cap/2 - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	tailCap := w.cap - w.cap/2
	for len(p) > 0 {
		if len(w.tail) < tailCap {
			k := min(tailCap-len(w.tail), len(p))
			w.tail = append(w.tail, p[:k]...)
			p = p[k:]
			continue
		}
		if len(p) >= tailCap {
			copy(w.tail, p[len(p)-tailCap:])
			w.start = 0
			break
		}
		k := copy(w.tail[w.start:], p)
		w.start = (w.start + k) % tailCap
		p = p[k:]
	}
	return n, nil
}

// String returns the kept output, with a note in place of what was
// left out (how much, of how much, and how to read it all), cut at UTF-8
// boundaries.
func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	tail := append(append([]byte(nil), w.tail[w.start:]...), w.tail[:w.start]...)
	dropped := w.total - int64(len(w.head)) - int64(len(tail))
	if dropped == 0 {
		return string(w.head) + string(tail)
	}
	head := w.head
	for len(head) > 0 && !utf8.FullRune(head[lastRuneStart(head):]) {
		head = head[:lastRuneStart(head)]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	omitted := w.total - int64(len(head)) - int64(len(tail))
	return fmt.Sprintf("%s\n[... output truncated: %d bytes omitted in the middle, of %d in all (the first %d and the last %d shown); "+
		"to see everything, redirect it to a file and read that with read_file or grep, "+
		"or run the command with background: true and read its output with process_output by offset ...]\n%s",
		head, omitted, w.total, len(head), len(tail), tail)
}

func lastRuneStart(b []byte) int {
	i := len(b) - 1
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return max(i, 0)
}
