package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// vterm is a program running in a pseudo-terminal whose output a
// terminal emulator draws, so that a test reads the screen as a person
// sees it (what a full-screen UI leaves on it, not the escape sequences
// it wrote) and the program gets the answers a terminal gives to its
// queries.
type vterm struct {
	t    *testing.T
	c    *exec.Cmd
	ptmx *os.File
	done chan struct{} // closed when the program's output ends
	wg   sync.WaitGroup

	mu  sync.Mutex
	emu *vt.Emulator
	raw strings.Builder // everything the program wrote, for failures
}

// startVTerm starts c in a cols×rows pseudo-terminal (its controlling
// terminal, stdin, stdout and stderr), with TERM set.
func startVTerm(t *testing.T, c *exec.Cmd, cols, rows int) *vterm {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	c.Env = append(c.Env, "TERM=xterm-256color")
	c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	v := &vterm{t: t, c: c, ptmx: ptmx, done: make(chan struct{}), emu: vt.NewEmulator(cols, rows)}
	replies := v.emu.InputPipe().(*io.PipeWriter)
	// The program's output, drawn.
	v.wg.Go(func() {
		defer close(v.done)
		b := make([]byte, 8192)
		for {
			n, err := ptmx.Read(b)
			if n > 0 {
				v.mu.Lock()
				v.raw.Write(b[:n])
				v.emu.Write(b[:n])
				v.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	})
	// The terminal's answers to the program's queries.
	v.wg.Go(func() {
		b := make([]byte, 1024)
		for {
			n, err := v.emu.Read(b)
			if n > 0 {
				ptmx.Write(b[:n])
			}
			if err != nil {
				return
			}
		}
	})
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
		ptmx.Close()
		<-v.done
		replies.CloseWithError(io.EOF)
		v.wg.Wait()
	})
	return v
}

// screen is what the terminal shows, one line per row, without
// trailing blanks.
func (v *vterm) screen() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var lines []string
	for l := range strings.Lines(v.emu.String()) {
		lines = append(lines, strings.TrimRight(l, " \n"))
	}
	return strings.Join(lines, "\n")
}

// wait waits until cond holds of the screen and returns the screen.
func (v *vterm) wait(what string, cond func(screen string) bool) string {
	v.t.Helper()
	var s string
	if !poll(30*time.Second, func() bool { s = v.screen(); return cond(s) }) {
		v.t.Fatalf("the screen never showed %s; it shows:\n%s", what, s)
	}
	return s
}

// expect waits until the screen shows want.
func (v *vterm) expect(want string) string {
	v.t.Helper()
	return v.wait(want, func(s string) bool { return strings.Contains(s, want) })
}

// send types s.
func (v *vterm) send(s string) {
	v.t.Helper()
	if _, err := v.ptmx.Write([]byte(s)); err != nil {
		v.t.Fatal(err)
	}
}

// resize makes the terminal cols×rows; the kernel tells the program
// (SIGWINCH).
func (v *vterm) resize(cols, rows int) {
	v.t.Helper()
	v.mu.Lock()
	v.emu.Resize(cols, rows)
	v.mu.Unlock()
	if err := pty.Setsize(v.ptmx, &pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}); err != nil {
		v.t.Fatal(err)
	}
}

// exit waits for the program to end and returns its exit code.
func (v *vterm) exit() int {
	v.t.Helper()
	ended := make(chan error, 1)
	go func() { ended <- v.c.Wait() }()
	select {
	case err := <-ended:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			v.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		v.c.Process.Kill()
		<-ended
		v.t.Fatalf("the program did not exit; the screen shows:\n%s", v.screen())
	}
	return -1
}

// lineAfter is the line below the first line of screen that contains
// s, or "".
func lineAfter(screen, s string) string {
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		if strings.Contains(l, s) && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	return ""
}
