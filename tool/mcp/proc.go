package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/env/sandbox"
)

// Bounds of a command's stderr.
const (
	maxStderrLine  = 2 << 10
	stderrTail     = 4 << 10
	stderrRate     = 50  // lines a second to the log
	stderrBurst    = 500 // lines at once
	defaultCmdPath = "/usr/local/bin:/usr/bin:/bin"
)

// inherited reports whether a command gets the host's variable k; an
// unconfined one also gets HOME and TMPDIR.
func inherited(k string, unconfined bool) bool {
	switch k {
	case "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "SHELL":
		return true
	case "HOME", "TMPDIR":
		return unconfined
	}
	return false
}

// proc is a server's process. Its waiter and stderr reader are tracked
// goroutines of the manager.
type proc struct {
	grace  time.Duration // see Config.StopGrace
	cmd    *exec.Cmd
	sc     *sandbox.Cmd // nil when run directly
	stdin  *os.File     // our end of its stdin
	stdout *os.File     // our end of its stdout
	stderr *os.File     // our end of its stderr

	exited  chan struct{} // closed once it has been waited for
	waitErr error         // set before exited is closed
	errDone chan struct{} // closed when stderr is drained
	tail    tail
	once    sync.Once
}

// startProc starts l's command with its stdin, stdout and stderr on
// pipes.
func (m *Manager) startProc(l *launch) (p *proc, err error) {
	env, err := m.procEnv(l)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(l.spec.Command, envValue(env, "PATH"), l.dir)
	if err != nil {
		return nil, err
	}
	var pipes []*os.File
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		pipes = append(pipes, r, w)
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	closeAll := func() {
		for _, f := range pipes {
			f.Close()
		}
	}
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("pipes: %w", err)
	}
	p = &proc{grace: m.cfg.StopGrace, stdin: inW, stdout: outR, stderr: errR, exited: make(chan struct{}), errDone: make(chan struct{})}
	start, wait := (func() error)(nil), (func() error)(nil)
	if l.policy != nil {
		p.sc, err = sandbox.Command(context.Background(), *l.policy, path, l.spec.Args...)
		if err != nil {
			closeAll()
			return nil, err
		}
		p.cmd, start, wait = p.sc.Cmd, p.sc.Start, p.sc.Wait
	} else {
		p.cmd = exec.Command(path, l.spec.Args...)
		start, wait = p.cmd.Start, p.cmd.Wait
	}
	p.cmd.Dir, p.cmd.Env = l.dir, env
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = inR, outW, errW
	setGroup(p.cmd)
	if err := start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	log := m.log.With("server", l.name)
	if !m.goTracked(func() {
		p.waitErr = wait()
		close(p.exited)
	}) {
		p.kill()
		p.waitErr = wait()
		close(p.exited)
		errR.Close()
		close(p.errDone)
		return nil, ErrClosed
	}
	if !m.goTracked(func() { p.readStderr(log) }) {
		errR.Close()
		close(p.errDone)
		p.stop()
		return nil, ErrClosed
	}
	return p, nil
}

// procEnv is a command's environment: the allowed host variables, then
// its own (with ${VAR} expanded), then for a sandboxed one HOME (its
// working directory unless env sets it) and the mount variables.
func (m *Manager) procEnv(l *launch) ([]string, error) {
	vars := map[string]string{}
	sandboxed := l.policy != nil && !l.policy.Unsandboxed
	for _, kv := range m.cfg.BaseEnv {
		k, v, ok := strings.Cut(kv, "=")
		if ok && inherited(k, !sandboxed) {
			vars[k] = v
		}
	}
	if vars["PATH"] == "" {
		vars["PATH"] = defaultCmdPath
	}
	if sandboxed && l.dir != "" {
		vars["HOME"] = l.dir
	}
	for _, kv := range l.mountVars {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for _, k := range sortedKeys(l.spec.Env) {
		v, err := expand(l.spec.Env[k], m.cfg.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath finds a command: a path (relative to dir), or a name in
// pathList. It reads no environment of its own.
func lookPath(command, pathList, dir string) (string, error) {
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) {
			if dir == "" {
				var err error
				if p, err = filepath.Abs(p); err != nil {
					return "", err
				}
			} else {
				p = filepath.Join(dir, p)
			}
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("command %s: %w", p, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, command)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH (%s)", command, pathList)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

// readStderr logs the command's stderr line by line, bounded, and keeps
// its tail.
func (p *proc) readStderr(log *slog.Logger) {
	defer close(p.errDone)
	defer p.stderr.Close()
	br := bufio.NewReaderSize(p.stderr, maxStderrLine)
	tokens, last := float64(stderrBurst), time.Now()
	dropped := 0
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			p.tail.add(line)
			now := time.Now()
			tokens = min(stderrBurst, tokens+now.Sub(last).Seconds()*stderrRate)
			last = now
			if tokens >= 1 {
				tokens--
				if dropped > 0 {
					log.Info("mcp server stderr: lines left out", "dropped", dropped)
					dropped = 0
				}
				log.Info("mcp server stderr", "line", line)
			} else {
				dropped++
			}
		}
		if err != nil {
			break
		}
	}
	if dropped > 0 {
		log.Info("mcp server stderr: lines left out", "dropped", dropped)
	}
}

// readLine reads one line, without its end, cut at maxStderrLine bytes
// (the rest of a longer line is skipped).
func readLine(br *bufio.Reader) (string, error) {
	b, err := br.ReadSlice('\n')
	line := strings.TrimRight(string(b), "\r\n")
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = br.ReadSlice('\n')
		line += " […]"
	}
	return strings.ToValidUTF8(line, "\uFFFD"), err
}

// stop ends the process: its stdin is closed; if it has not exited after
// a grace period it gets SIGTERM, and after another its tree is killed.
// Then its pipes are closed and stop returns when it has been waited for
// and its stderr drained. Safe to call more than once.
func (p *proc) stop() {
	p.once.Do(func() {
		p.stdin.Close()
		if !p.exitWithin(p.grace) {
			terminate(p.cmd)
			if !p.exitWithin(p.grace) {
				p.kill()
			}
		}
		<-p.exited
		if p.sc == nil {
			killGroup(p.cmd) // what it left in its group
		}
		// A process that left the group may hold the pipes.
		p.stdout.Close()
		p.stderr.SetReadDeadline(time.Now().Add(p.grace))
	})
	<-p.exited
	<-p.errDone
}

func (p *proc) kill() {
	if p.sc != nil {
		p.sc.Kill()
		return
	}
	killGroup(p.cmd)
}

func (p *proc) exitWithin(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// awaitExit waits a little for the process to exit, so that its status
// can be told.
func (p *proc) awaitExit(ctx context.Context) {
	t := time.NewTimer(endWait)
	defer t.Stop()
	select {
	case <-p.exited:
		<-p.errDone
	case <-t.C:
	case <-ctx.Done():
	}
}

// deniedRe matches what a program prints when it is refused a file:
// Node's EACCES/EPERM/EROFS, C's and Python's strerror texts.
// deniedRe is compiled on first use, not at start: most commands never need it.
var deniedRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(EACCES|EPERM|EROFS)\b|permission denied|operation not permitted|read-only file system`)
})

// sandboxHint is the likely fix for a server refused a file: the sandbox
// lets it read only the system directories, its readOnly paths and the
// session's mounts, and write only the writable mounts.
const sandboxHint = "it was refused a file, likely by the sandbox: list the directory it is installed in (or reads) under the server's readOnly in the config file, give it a cache directory in a writable mount through env, or, for a server you trust, set trusted: true to run it unsandboxed (docs/config.md)"

// describe says how the process ended, the likely fix when it was
// refused a file, and what it last wrote to stderr.
func (p *proc) describe() string {
	var parts []string
	select {
	case <-p.exited:
		var ee *exec.ExitError
		switch {
		case p.waitErr == nil:
			parts = append(parts, "exited with status 0")
		case errors.As(p.waitErr, &ee):
			parts = append(parts, exitStatus(ee))
		default:
			parts = append(parts, p.waitErr.Error())
		}
	default:
		parts = append(parts, "still running")
	}
	if t := p.tail.String(); t != "" {
		if deniedRe().MatchString(t) {
			parts = append(parts, sandboxHint)
		}
		parts = append(parts, "stderr: "+t)
	} else {
		parts = append(parts, "no stderr")
	}
	return strings.Join(parts, "; ")
}

// tail keeps the last stderrTail bytes of lines. Safe for concurrent use.
type tail struct {
	mu    sync.Mutex
	lines []string
	n     int
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(line) > stderrTail {
		line = line[len(line)-stderrTail:]
	}
	t.lines = append(t.lines, line)
	t.n += len(line) + 1
	for t.n > stderrTail && len(t.lines) > 1 {
		t.n -= len(t.lines[0]) + 1
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
