package lease_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/internal/lease"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Environment of the child process that holds a host lease.
const (
	childDirEnv  = "WEFT_LEASE_CHILD_DIR"
	childModeEnv = "WEFT_LEASE_CHILD_MODE" // "serve" or "shared"
)

// holder is a child process (this test binary, re-executed) that tried to
// take the host lease of a directory and, if it got it, holds it until its
// stdin closes.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	line  string // "held" or the error
}

// startHolder starts a child that takes the host lease of dir in mode and
// waits for its first line.
func startHolder(t *testing.T, dir, mode string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostLeaseChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childModeEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child %s: %v", mode, err)
	}
	h.line = strings.TrimSpace(line)
	return h
}

// stop closes the child's stdin, so that it releases the lease and exits,
// and waits for it. It may be called more than once.
func (h *holder) stop() {
	if h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
		h.cmd.Wait()
	}
}

func (h *holder) pid() int { return h.cmd.Process.Pid }

// TestHostLeaseChild is the child of the host lease tests; it does nothing
// (and passes, so that no skip hides a real one) unless started by them.
func TestHostLeaseChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		return
	}
	var (
		l   *lease.Lease
		err error
	)
	switch mode := os.Getenv(childModeEnv); mode {
	case "serve":
		l, err = lease.AcquireHost(dir, "weft serve")
	case "shared":
		l, err = lease.AcquireHostShared(dir)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	l.Release()
}

func served(pid int) string {
	return fmt.Sprintf("host pid %d (weft serve) already serves this store", pid)
}

func TestHostExclusiveRefusesExclusive(t *testing.T) {
	dir := t.TempDir()
	first := startHolder(t, dir, "serve")
	if first.line != "held" {
		t.Fatalf("first host: %s", first.line)
	}
	second := startHolder(t, dir, "serve")
	if second.line != served(first.pid()) {
		t.Fatalf("second host got %q, want %q", second.line, served(first.pid()))
	}
	_, err := lease.AcquireHost(dir, "weft rpc")
	if !errors.Is(err, lease.ErrHostHeld) || err.Error() != served(first.pid()) {
		t.Fatalf("AcquireHost while served: %v", err)
	}
	first.stop()
	l, err := lease.AcquireHost(dir, "weft rpc")
	if err != nil {
		t.Fatalf("after the host exited: %v", err)
	}
	l.Release()
}

func TestHostSharedAllowsShared(t *testing.T) {
	dir := t.TempDir()
	a := startHolder(t, dir, "shared")
	b := startHolder(t, dir, "shared")
	if a.line != "held" || b.line != "held" {
		t.Fatalf("two shared holders: %q, %q", a.line, b.line)
	}
	l, err := lease.AcquireHostShared(dir)
	if err != nil {
		t.Fatalf("a third shared holder: %v", err)
	}
	l.Release()
}

func TestHostSharedRefusesExclusive(t *testing.T) {
	dir := t.TempDir()
	run := startHolder(t, dir, "shared")
	if run.line != "held" {
		t.Fatalf("shared holder: %s", run.line)
	}
	h := startHolder(t, dir, "serve")
	if !strings.Contains(h.line, "another weft process runs on this store in-process") {
		t.Fatalf("a host while a local run holds the store: %q", h.line)
	}
	if _, err := lease.AcquireHost(dir, "weft serve"); !errors.Is(err, lease.ErrHostHeld) {
		t.Fatalf("AcquireHost while shared: %v", err)
	}
	run.stop()
	h = startHolder(t, dir, "serve")
	if h.line != "held" {
		t.Fatalf("a host after the local run: %q", h.line)
	}
}

func TestHostExclusiveRefusesShared(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, dir, "serve")
	if h.line != "held" {
		t.Fatalf("host: %s", h.line)
	}
	run := startHolder(t, dir, "shared")
	if run.line != served(h.pid()) {
		t.Fatalf("a local run while a host serves: %q", run.line)
	}
	if _, err := lease.AcquireHostShared(dir); !errors.Is(err, lease.ErrHostHeld) || err.Error() != served(h.pid()) {
		t.Fatalf("AcquireHostShared while served: %v", err)
	}
}

// TestHostKilledReleases: the kernel drops the lease of a SIGKILLed host.
func TestHostKilledReleases(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, dir, "serve")
	if h.line != "held" {
		t.Fatalf("host: %s", h.line)
	}
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.stop()
	l, err := lease.AcquireHost(dir, "weft serve")
	if err != nil {
		t.Fatalf("after the host was killed: %v", err)
	}
	l.Release()
	run := startHolder(t, dir, "shared")
	if run.line != "held" {
		t.Fatalf("a local run after the host released: %q", run.line)
	}
}

// TestHostUnreadableNote: a host whose note cannot be parsed is still
// refused, in general words.
func TestHostUnreadableNote(t *testing.T) {
	dir := t.TempDir()
	h := startHolder(t, dir, "serve")
	if h.line != "held" {
		t.Fatalf("host: %s", h.line)
	}
	if err := os.WriteFile(dir+"/host.lock", []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := lease.AcquireHost(dir, "weft serve")
	if !errors.Is(err, lease.ErrHostHeld) || err.Error() != "another weft process already serves this store" {
		t.Fatalf("AcquireHost with an unreadable note: %v", err)
	}
}
