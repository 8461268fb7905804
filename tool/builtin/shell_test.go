package builtin_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// alive reports whether pid is a live process (zombies count as dead: they
// only wait to be reaped by whoever adopted them).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

var pidRE = regexp.MustCompile(`pid=(\d+)`)

// pids returns the pids a command printed as pid=N.
func pids(t *testing.T, out string) []int {
	t.Helper()
	var ps []int
	for _, m := range pidRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		ps = append(ps, n)
	}
	return ps
}

func checkDead(t *testing.T, ps []int, want int) {
	t.Helper()
	if len(ps) != want {
		t.Fatalf("got pids %v, want %d", ps, want)
	}
	// SIGKILL is delivered asynchronously; give the kernel a moment.
	survivors := func() []int {
		var out []int
		for _, p := range ps {
			if alive(p) {
				out = append(out, p)
			}
		}
		return out
	}
	proctest.Eventually(t, 2*time.Second, func() string { return fmt.Sprintf("processes %v survived", survivors()) }, func() bool {
		return len(survivors()) == 0
	})
}

func TestShell(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	res := f.call("shell", m{"command": "cat a.txt; echo err >&2; exit 3"})
	check(t, res, false, "one\ntwo\nthree\nerr\n[exit code 3]")
	res = f.call("shell", m{"command": "pwd; echo $HOME; echo $TERM; env | sort | cut -d= -f1 | tr '\\n' ' '"})
	real, _ := filepath.EvalSymlinks(f.work)
	check(t, res, false, real+"\n"+real+"\ndumb\n", "[exit code 0]")
	if strings.Contains(res.Output, "GOPATH") || strings.Contains(res.Output, "USER ") {
		t.Errorf("host environment leaked:\n%s", res.Output)
	}
	check(t, f.call("shell", m{"command": "pwd", "cwd": "src/util"}), false, filepath.Join(real, "src", "util")+"\n")
	// Shells find every mount where the file tools say it is.
	check(t, f.call("shell", m{"command": `echo "$WEFT_MOUNT_WORK"`}), false, f.work+"\n")
	check(t, f.call("shell", m{"command": "pwd", "cwd": "/environment/docs"}), true, `read-only mount "docs"`)
	check(t, f.call("shell", m{"command": "pwd", "cwd": "../"}), true, `outside mount "work"`)
	check(t, f.call("shell", m{"command": "pwd", "cwd": "a.txt"}), true, "not a directory")
	check(t, f.call("shell", m{"command": "  "}), true, "command is empty")
	check(t, f.call("shell", m{"command": "true", "timeout": -1}), true, "negative")

	// A symlinked cwd that leads out of the mount is refused.
	os.Symlink("..", filepath.Join(f.work, "up"))
	check(t, f.call("shell", m{"command": "pwd", "cwd": "up"}), true, "outside mount")
}

// A command over api.MaxShellCommandBytes is refused before anything
// runs, naming the limit; one at the limit runs.
func TestShellCommandLimit(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	long := "touch ran; : " + strings.Repeat("x", api.MaxShellCommandBytes)
	check(t, f.call("shell", m{"command": long}), true, "more than 65536")
	if _, err := os.Stat(filepath.Join(f.work, "ran")); !os.IsNotExist(err) {
		t.Fatalf("the refused command ran: %v", err)
	}
	atLimit := "touch ran; : " + strings.Repeat("x", api.MaxShellCommandBytes-len("touch ran; : "))
	check(t, f.call("shell", m{"command": atLimit}), false, "[exit code 0]")
}

func TestShellNeedsRWMount(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, builtin.Options{}, event.Mount{ID: "ro", Kind: event.KindLocal, Path: dir, Mode: event.ModeReadOnly})
	check(t, f.call("shell", m{"command": "true"}), true, "no read-write mount")
	raw, _ := json.Marshal(m{"command": "true"})
	res := f.r.Call(t.Context(), "shell", &tool.Call{Arguments: raw}, tool.CallOptions{})
	check(t, res, true, "no read-write mount")
}

func TestShellTimeoutKillsGroup(t *testing.T) {
	f := newFixture(t, builtin.Options{ShellKillGrace: 300 * time.Millisecond})
	// The shell, a background sleep, and a nested shell that ignores
	// SIGTERM (so SIGKILL is needed) all must die.
	cmd := `echo pid=$$; sleep 100 & echo pid=$!; sh -c 'trap "" TERM; echo pid=$$; sleep 100; sleep 100' & sleep 100`
	start := time.Now()
	res := f.call("shell", m{"command": cmd, "timeout": 1})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	check(t, res, true, "[timed out after 1s; the command and its children were killed]")
	checkDead(t, pids(t, res.Output), 3)
}

func TestShellSpecCommand(t *testing.T) {
	f := newFixture(t, builtin.Options{ShellKillGrace: 200 * time.Millisecond})
	// The brief's case: sh -c 'sleep 100 & sleep 100' as the command.
	res := f.call("shell", m{"command": `sh -c 'echo pid=$$; sleep 100 & echo pid=$!; sleep 100'`, "timeout": 1})
	check(t, res, true, "timed out")
	checkDead(t, pids(t, res.Output), 2)
}

func TestShellBackgroundJobsDoNotOutliveCall(t *testing.T) {
	f := newFixture(t, builtin.Options{ShellKillGrace: 200 * time.Millisecond})
	res := f.call("shell", m{"command": `sleep 100 & echo pid=$!`})
	check(t, res, false, "[exit code 0]")
	checkDead(t, pids(t, res.Output), 1)
}

func TestShellCancel(t *testing.T) {
	f := newFixture(t, builtin.Options{ShellKillGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	marker := filepath.Join(f.work, "started")
	raw, _ := json.Marshal(m{"command": `echo pid=$$ > started.tmp; sleep 100 & echo pid=$! >> started.tmp; mv started.tmp started; wait`})
	done := make(chan tool.Result, 1) // the call may end after a failed test
	go func() {
		done <- f.r.Call(ctx, "shell", &tool.Call{Arguments: raw, Env: f.b}, tool.CallOptions{})
	}()
	proctest.Eventually(t, 10*time.Second, func() string { return "the command never wrote " + marker }, func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	cancel()
	var res tool.Result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not stop the command")
	}
	if !res.IsError || res.Output != "cancelled" {
		t.Errorf("got %+v", res)
	}
	data, _ := os.ReadFile(marker)
	checkDead(t, pids(t, string(data)), 2)
}

func TestShellOutputCap(t *testing.T) {
	f := newFixture(t, builtin.Options{ShellOutputCap: 1000})
	res := f.call("shell", m{"command": `echo BEGIN; i=0; while [ $i -lt 2000 ]; do echo "line $i é€"; i=$((i+1)); done; echo END`})
	check(t, res, false, "BEGIN\n", "END\n[exit code 0]", "output truncated: ", " bytes omitted in the middle, of ")
	if len(res.Output) > 1400 { // the cap, the note of what was left out and the exit code
		t.Errorf("output is %d bytes", len(res.Output))
	}
	// Registry timeout also stops the shell.
	raw, _ := json.Marshal(m{"command": "sleep 100"})
	start := time.Now()
	r := f.r.Call(t.Context(), "shell", &tool.Call{Arguments: raw, Env: f.b}, tool.CallOptions{Timeout: 200 * time.Millisecond})
	if !r.IsError || !strings.Contains(r.Output, "timed out after 200ms") || time.Since(start) > 5*time.Second {
		t.Errorf("registry timeout: %+v after %v", r, time.Since(start))
	}
}

func TestReadFileFirstLineOverBudget(t *testing.T) {
	f := newFixture(t, builtin.Options{ReadMaxBytes: 1000})
	f.write(filepath.Join(f.work, "wide.txt"), strings.Repeat("x", 5000)+"\nshort\n")
	check(t, f.call("read_file", m{"path": "wide.txt"}), false, "     1\txxx", "line cut", "     2\tshort")
}

func needLandlock(t *testing.T) {
	t.Helper()
	testenv.Landlock(t, 1)
}

// TestShellSandboxed runs the spec's shell escapes through the shell tool
// under Landlock: zero escapes, and writes into the read-only mount fail.
func TestShellSandboxed(t *testing.T) {
	needLandlock(t)
	f := newFixture(t, builtin.Options{Sandbox: &sandbox.Config{}})
	secret := filepath.Join(f.dir, "secret.txt")
	if spec := f.r.Specs(); !strings.Contains(fmt.Sprint(spec), "Commands run in a sandbox") {
		t.Errorf("shell description does not mention the sandbox")
	}
	for _, cmd := range []string{
		"cat " + secret,
		"cat ../secret.txt",
		"echo x > " + filepath.Join(f.docs, "new.md"),
		"echo x >> " + filepath.Join(f.docs, "readme.md"),
		"ln -s / x && cat x" + secret,
		"ln -s .. up && cat up/secret.txt",
		"cp " + secret + " stolen && cat stolen",
		"ln " + secret + " hard && cat hard",
	} {
		res := f.call("shell", m{"command": cmd})
		if strings.Contains(res.Output, "SECRET") || strings.Contains(res.Output, "[exit code 0]") {
			t.Errorf("%s: escaped:\n%s", cmd, res.Output)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(f.docs, "readme.md")); !strings.HasPrefix(string(data), "# Docs") || strings.Contains(string(data), "x\n") {
		t.Errorf("ro mount changed: %q", data)
	}
	if _, err := os.Stat(filepath.Join(f.docs, "new.md")); err == nil {
		t.Error("file created in the ro mount")
	}
	res := f.call("shell", m{"command": `cat ` + filepath.Join(f.docs, "readme.md") + ` | head -1; echo hi > new.txt && cat new.txt; echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "$TMPDIR"`})
	check(t, res, false, "# Docs\nhi\nt\n", "[exit code 0]")
	tmp := strings.Split(strings.TrimSpace(strings.Split(res.Output, "[exit")[0]), "\n")
	if dir := tmp[len(tmp)-1]; !filepath.IsAbs(dir) {
		t.Errorf("TMPDIR %q", dir)
	} else if _, err := os.Stat(dir); err == nil {
		t.Errorf("TMPDIR %s left behind", dir)
	}
}

// TestShellSandboxedKillsGroup checks that the group semantics survive the
// helper: the timeout and the end of the call reach the shell and its
// children. Processes are found by a marker in their environment: pids
// the shell prints ($$, $!) are its PID namespace's.
func TestShellSandboxedKillsGroup(t *testing.T) {
	needLandlock(t)
	mark := proctest.NewMarker()
	f := newFixture(t, builtin.Options{ShellKillGrace: 300 * time.Millisecond, Sandbox: &sandbox.Config{}, ShellEnv: []string{proctest.Env(mark)}})
	cmd := `echo started; sleep 100 & sh -c 'trap "" TERM; echo started; sleep 100; sleep 100' & sleep 100`
	res := f.call("shell", m{"command": cmd, "timeout": 1})
	check(t, res, true, "started\nstarted\n", "[timed out after 1s; the command and its children were killed]")
	proctest.WaitGone(t, mark)
	res = f.call("shell", m{"command": `sleep 100 & echo started`})
	check(t, res, false, "started\n[exit code 0]")
	proctest.WaitGone(t, mark)
}

// TestShellUnsandboxedOptIn checks the explicit opt-out: the command runs
// unconfined, with a private TMPDIR.
func TestShellUnsandboxedOptIn(t *testing.T) {
	f := newFixture(t, builtin.Options{Sandbox: &sandbox.Config{Unsandboxed: true}})
	if spec := f.r.Specs(); strings.Contains(fmt.Sprint(spec), "sandbox") {
		t.Errorf("unsandboxed shell description mentions a sandbox")
	}
	res := f.call("shell", m{"command": `cat ../secret.txt; echo; echo t > "$TMPDIR/t" && cat "$TMPDIR/t"`})
	check(t, res, false, "SECRET\nt\n[exit code 0]")
}

// TestShellSandboxRefusedWithoutLandlock: on a kernel without Landlock
// (a child test binary that lacks it) the shell is refused with the way
// out.
func TestShellSandboxRefusedWithoutLandlock(t *testing.T) {
	if testenv.Without(t, testenv.NoLandlock) {
		return
	}
	f := newFixture(t, builtin.Options{Sandbox: &sandbox.Config{}})
	check(t, f.call("shell", m{"command": "true"}), true, `shell refused: this kernel has no Landlock`, `set "unsandboxed": true in the config`)
}

// seqBytes is the size of the output of `seq 1 n`.
func seqBytes(n int) int {
	total := 0
	for i := 1; i <= n; i++ {
		total += len(strconv.Itoa(i)) + 1
	}
	return total
}

// TestNoisyFailingShell: a command that prints far more than the model's
// budget and then fails keeps, within the budget, its first lines, its
// last line, its exit code and the true size of what it printed.
func TestNoisyFailingShell(t *testing.T) {
	f := newFixture(t, builtin.Options{})
	total := seqBytes(200000) + len("FAILED-BUILD\n")
	for _, budget := range []int{0, 16 << 10, 4 << 10} {
		raw, _ := json.Marshal(m{"command": "seq 1 200000; echo FAILED-BUILD >&2; exit 3"})
		res := f.r.Call(t.Context(), "shell", &tool.Call{ID: "c1", Arguments: raw, Env: f.b}, tool.CallOptions{ResultBudget: budget})
		limit := cmp.Or(budget, tool.DefaultResultBudget)
		check(t, res, false, "1\n2\n3\n", "199999\n200000\nFAILED-BUILD\n", "[exit code 3]", fmt.Sprintf("of %d in all", total))
		if len(res.Output) > limit {
			t.Errorf("budget %d: the result is %d bytes", budget, len(res.Output))
		}
		if !strings.HasSuffix(res.Output, "[exit code 3]") {
			t.Errorf("budget %d: the result does not end with the exit code: %q", budget, res.Output[max(0, len(res.Output)-300):])
		}
	}
}

// TestShellResultAlwaysSaysHowItEnded: the exit code and the reason a
// command was stopped are in every result, cut or not.
func TestShellResultAlwaysSaysHowItEnded(t *testing.T) {
	f := newFixture(t, builtin.Options{ShellKillGrace: 200 * time.Millisecond})
	for _, budget := range []int{1 << 20, 2 << 10} {
		raw, _ := json.Marshal(m{"command": "seq 1 100000; echo LAST; sleep 100", "timeout": 1})
		res := f.r.Call(t.Context(), "shell", &tool.Call{ID: "c1", Arguments: raw, Env: f.b}, tool.CallOptions{ResultBudget: budget})
		check(t, res, true, "LAST\n", "timed out after 1s", "exit code ")
		if len(res.Output) > budget {
			t.Errorf("budget %d: the result is %d bytes", budget, len(res.Output))
		}
	}
}
