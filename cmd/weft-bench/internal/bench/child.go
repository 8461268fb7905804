package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// command prepares a child process that dies with ctx: in its own
// process group (which killTree kills whole), with a parent-death signal
// where the system has one, and a bounded wait for its pipes.
func command(ctx context.Context, env []string, dir, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Env, c.Dir = env, dir
	setChildAttr(c)
	c.Cancel = func() error { return killTree(c.Process) }
	c.WaitDelay = 5 * time.Second
	return c
}

// child is a long-running process of the bench (`weft rpc`, `weft serve`,
// `codex app-server`). Stop kills its process group and waits for it.
type child struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	once   sync.Once
}

// startChild starts c with its standard error kept in a tail buffer.
func startChild(c *exec.Cmd) (*child, error) {
	ch := &child{cmd: c, stderr: &tailBuffer{max: 8 << 10}}
	if c.Stderr == nil {
		c.Stderr = ch.stderr
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	return ch, nil
}

// pid returns the child's process ID.
func (c *child) pid() int { return c.cmd.Process.Pid }

// Stop kills the child and everything in its process group and waits for
// it. It may be called more than once.
func (c *child) Stop() {
	c.once.Do(func() {
		_ = killTree(c.cmd.Process)
		_ = c.cmd.Wait()
	})
}

// errorf wraps err with what the child last wrote to its standard error.
func (c *child) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if s := strings.TrimSpace(c.stderr.String()); s != "" {
		return fmt.Errorf("%w; its stderr ends: %s", err, lastLines(s, 5))
	}
	return err
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it. Safe for concurrent
// use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// peakInterval is how often runMeasured samples a child's memory.
const peakInterval = 2 * time.Millisecond

// runMeasured runs c to its exit and returns its wall time (start to
// exit), its CPU time (with that of the children it waited for) and the
// peak resident memory of its process tree, sampled every peakInterval
// (see watchPeak; 0 off Linux).
func runMeasured(c *exec.Cmd) (wall, cpu time.Duration, peak int64, err error) {
	t0 := time.Now()
	if err := c.Start(); err != nil {
		return 0, 0, 0, err
	}
	stop := watchPeak(c.Process.Pid, peakInterval)
	err = c.Wait()
	wall = time.Since(t0)
	peak = stop()
	if err != nil {
		return wall, 0, 0, err
	}
	return wall, c.ProcessState.UserTime() + c.ProcessState.SystemTime(), peak, nil
}
