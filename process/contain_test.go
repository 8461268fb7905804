//go:build linux

package process_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/process"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// marked starts a shell process running cmd with a fresh marker.
func (f *fixture) marked(t *testing.T, cmd string, mod ...func(*process.StartParams)) (record.Process, string) {
	t.Helper()
	mark := proctest.NewMarker()
	p := f.shell(t, cmd, append([]func(*process.StartParams){func(sp *process.StartParams) {
		sp.Env = map[string]string{proctest.MarkerKey: mark}
	}}, mod...)...)
	return p, mark
}

// TestContainment: a background shell's whole tree, setsid and
// double-forked children included, ends when it is cancelled, signalled
// with kill, or when the shell exits on its own; on pipes and on a pty.
func TestContainment(t *testing.T) {
	proctest.EachContainment(t, func(t *testing.T, cfg sandbox.Config) {
		f := setup(t, process.Config{Sandbox: &cfg})
		for _, pty := range []bool{false, true} {
			onPTY := func(sp *process.StartParams) { sp.PTY = pty }
			p, mark := f.marked(t, proctest.Tree, onPTY)
			proctest.WaitTree(t, mark, "300", "301", "302")
			rec, err := f.m.Cancel(context.Background(), p.ID, "enough", owner)
			if err != nil || rec.Status != record.ProcessCancelled {
				t.Fatalf("pty=%v: cancel = %+v, %v", pty, rec, err)
			}
			proctest.WaitGone(t, mark)

			p, mark = f.marked(t, proctest.Tree, onPTY)
			proctest.WaitTree(t, mark, "300", "301", "302")
			if _, err := f.m.Signal(context.Background(), p.ID, "kill", nil, owner); err != nil {
				t.Fatal(err)
			}
			f.await(t, p.ID)
			proctest.WaitGone(t, mark)

			p, mark = f.marked(t, `setsid sleep 300 & (sleep 301 &) ; sleep 302 & exit 0`, onPTY)
			res := f.await(t, p.ID)
			if res.Process.Status != record.ProcessCompleted || *res.Process.ExitCode != 0 {
				t.Errorf("pty=%v: exit = %+v", pty, res.Process)
			}
			proctest.WaitGone(t, mark)
		}
	})
}

// TestContainedSignalAndPTY: process/signal interrupt reaches a shell
// that traps it, through the helper; on a pty the shell is the
// terminal's foreground group (^C reaches it) and reads its input.
func TestContainedSignalAndPTY(t *testing.T) {
	proctest.EachContainment(t, func(t *testing.T, cfg sandbox.Config) {
		f := setup(t, process.Config{Sandbox: &cfg})
		trap := `trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.05; done`
		for _, pty := range []bool{false, true} {
			p := f.shell(t, trap, func(sp *process.StartParams) { sp.PTY = pty })
			f.waitOutput(t, p.ID, "ready")
			if _, err := f.m.Signal(context.Background(), p.ID, "interrupt", json.RawMessage(`{}`), owner); err != nil {
				t.Fatal(err)
			}
			res := f.await(t, p.ID)
			if res.Process.Status != record.ProcessFailed || *res.Process.ExitCode != 3 || !strings.Contains(res.Tail, "got-int") {
				t.Errorf("pty=%v: after interrupt: %+v", pty, res)
			}
		}

		p := f.shell(t, trap, func(sp *process.StartParams) { sp.PTY = true })
		f.waitOutput(t, p.ID, "ready")
		if err := f.m.Write(context.Background(), p.ID, []byte{3}, owner); err != nil { // ^C
			t.Fatal(err)
		}
		if res := f.await(t, p.ID); *res.Process.ExitCode != 3 || !strings.Contains(res.Tail, "got-int") {
			t.Errorf("^C on the pty: %+v", res)
		}

		p = f.shell(t, `tty; test -t 0 && echo is-a-tty; read line; echo got:$line`, func(sp *process.StartParams) { sp.PTY = true })
		f.waitOutput(t, p.ID, "is-a-tty")
		if err := f.m.Write(context.Background(), p.ID, []byte("hello\n"), owner); err != nil {
			t.Fatal(err)
		}
		res := f.await(t, p.ID)
		if res.Process.Status != record.ProcessCompleted || !strings.Contains(res.Tail, "/dev/pts/") || !strings.Contains(res.Tail, "got:hello") {
			t.Errorf("pty: %+v", res)
		}

		p = f.shell(t, `exit 5`)
		if res := f.await(t, p.ID); res.Process.Status != record.ProcessFailed || *res.Process.ExitCode != 5 {
			t.Errorf("exit 5: %+v", res.Process)
		}
	})
}

// TestContainedHostDeath kills a host (this test binary re-executed) with
// SIGKILL while its shell process runs a tree with setsid and
// double-forked children: the whole tree dies with it, before any
// recovery. The next Manager's Recover then settles the record and
// removes the command's temporary directory.
func TestContainedHostDeath(t *testing.T) {
	proctest.EachContainment(t, func(t *testing.T, cfg sandbox.Config) {
		dir := t.TempDir()
		db := filepath.Join(dir, "weft.db")
		mark := proctest.NewMarker()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+db, containEnv+"="+strings.Join([]string{cfg.Containment, mark, cfg.TempRoot}, ":"))
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cmd.Process.Kill()
			cmd.Wait()
		}()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		var id string
		var pgid int
		if _, serr := fmt.Sscanf(line, "started %s %d", &id, &pgid); err != nil || serr != nil {
			t.Fatalf("child said %q, %v", line, err)
		}
		proctest.WaitTree(t, mark, "300", "301", "302")
		if tmp, _ := filepath.Glob(filepath.Join(cfg.TempRoot, "weft-cmd-*")); len(tmp) != 1 {
			t.Fatalf("temporary directories %v", tmp)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		proctest.WaitGone(t, mark)

		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		m, err := process.New(process.Config{Store: st, Sandbox: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		rep, err := m.Recover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Abandoned, []string{id}) || rep.Killed != 0 || rep.TempDirs != 1 {
			t.Errorf("report = %+v; want %s abandoned, nothing killed, 1 temporary directory", rep, id)
		}
		if tmp, _ := filepath.Glob(filepath.Join(cfg.TempRoot, "weft-cmd-*")); len(tmp) != 0 {
			t.Errorf("temporary directories left: %v", tmp)
		}
	})
}

// TestStartFailureCleansUp: a shell whose helper cannot start leaves no
// temporary directory behind. (The subreaper is forced: in a PID
// namespace the host may start the shell without the helper.)
func TestStartFailureCleansUp(t *testing.T) {
	root := t.TempDir()
	f := setup(t, process.Config{Sandbox: &sandbox.Config{Unsandboxed: true, Executable: "/nonexistent/weft", TempRoot: root, Containment: sandbox.ContainmentSubreaper}})
	for _, pty := range []bool{false, true} {
		_, err := f.m.Start(context.Background(), process.StartParams{SessionID: "s1", Kind: record.ProcessShell, Command: "true",
			Binding: f.b, Disposition: record.OwnerBound, PTY: pty})
		if err == nil {
			t.Fatalf("pty=%v: Start succeeded", pty)
		}
		if left, _ := os.ReadDir(root); len(left) != 0 {
			t.Errorf("pty=%v: left %v", pty, left)
		}
	}
}
