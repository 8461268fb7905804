package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/cmd/weft-bench/internal/bench"
)

// binDir holds weft-bench and weft, built once for the tests side by side,
// as `go build -o bin/ ./cmd/weft ./cmd/weft-bench` leaves them.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weft-bench-e2e")
	if err != nil {
		panic(err)
	}
	binDir = dir
	// The real things: static binaries, as users build them.
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../weft")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build weft-bench and weft: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// benchCommand prepares weft-bench with args in a directory of its own,
// which is also its HOME and TMPDIR, and with PATH left as it is.
func benchCommand(t *testing.T, args ...string) (c *exec.Cmd, dir string, stdout, stderr *bytes.Buffer) {
	t.Helper()
	dir = t.TempDir()
	c = exec.CommandContext(t.Context(), filepath.Join(binDir, "weft-bench"), args...)
	c.Dir = dir
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	c.Stdout, c.Stderr = stdout, stderr
	return c, dir, stdout, stderr
}

// exitCode returns the exit code of a finished command's error.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("weft-bench did not run: %v", err)
	return -1
}

// TestQuickJSON runs `weft-bench --quick --json` without Codex and checks
// that every figure measured something: the weft beside weft-bench is the
// one measured (the process figures run it as `weft run`, `weft rpc` and
// `weft serve`), the report names it, the plots are PNG charts, and
// nothing is left behind.
func TestQuickJSON(t *testing.T) {
	c, dir, out, errb := benchCommand(t, "--quick", "--json", "--codex", "none", "--plots", "plots")
	t0 := time.Now()
	if err := c.Run(); err != nil {
		t.Fatalf("weft-bench: %v\n%s", err, errb.String())
	}
	t.Logf("weft-bench --quick took %s", time.Since(t0))
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not a report: %v\n%s", err, out.String())
	}
	if !rep.Quick {
		t.Error("report not marked quick")
	}
	if !strings.HasPrefix(rep.Machine.Weft, "weft ") {
		t.Errorf("report names the weft measured as %q", rep.Machine.Weft)
	}
	rows := map[string]int{}
	for _, res := range rep.Results {
		rows[res.Figure]++
		switch {
		case res.Verdict == bench.Failed:
			t.Errorf("%s: %s failed: %s", res.Figure, res.Name, res.Note)
		case res.Verdict == bench.Skipped && res.Figure != "oneshot" && res.Figure != "warm-turn":
			t.Errorf("%s: %s skipped: %s", res.Figure, res.Name, res.Note)
		case res.Verdict == bench.Skipped && !strings.Contains(res.Note, "codex"):
			t.Errorf("%s: %s skipped for another reason than Codex: %s", res.Figure, res.Name, res.Note)
		case len(res.Values) == 0:
			t.Errorf("%s: %s: no values", res.Figure, res.Name)
		}
		if res.Figure == "sandbox-start" && !strings.Contains(res.Note, "helper, where one runs: the weft binary") {
			t.Errorf("sandbox-start's helper is not the weft binary: %s", res.Note)
		}
	}
	for _, f := range bench.Figures() {
		if rows[f[0]] == 0 {
			t.Errorf("figure %s: no result", f[0])
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "plots"))
	if err != nil || len(ents) < 5 {
		t.Errorf("plots: %d files, %v", len(ents), err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, "plots", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.DecodeConfig(bytes.NewReader(b)); err != nil || !strings.HasSuffix(e.Name(), ".png") {
			t.Errorf("%s: not a PNG image: %v", e.Name(), err)
		}
	}
	if !strings.Contains(errb.String(), "weft-bench: plots: ") {
		t.Errorf("stderr does not list the plots:\n%s", errb.String())
	}
	left, _ := filepath.Glob(filepath.Join(dir, "weft-bench-*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestWeftNone checks that --weft none leaves out the figures that run
// weft, saying how to give one, and still measures the others.
func TestWeftNone(t *testing.T) {
	c, _, out, errb := benchCommand(t, "--quick", "--json", "--codex", "none", "--weft", "none", "--only", "^(oneshot|startup|run-start)$")
	if err := c.Run(); err != nil {
		t.Fatalf("weft-bench: %v\n%s", err, errb.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not a report: %v\n%s", err, out.String())
	}
	if rep.Machine.Weft != "" {
		t.Errorf("report names a weft: %q", rep.Machine.Weft)
	}
	for _, res := range rep.Results {
		switch res.Figure {
		case "run-start":
			if res.Verdict == bench.Skipped || res.Verdict == bench.Failed {
				t.Errorf("run-start: %s: %s", res.Verdict, res.Note)
			}
		default:
			if res.Verdict != bench.Skipped || !strings.Contains(res.Note, "--weft PATH") {
				t.Errorf("%s: %s: %s %q, want skipped, saying --weft PATH", res.Figure, res.Name, res.Verdict, res.Note)
			}
		}
	}
}

// TestUsage checks the mistakes on the command line: exit 2, saying what
// is wrong.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--weft", "/nonexistent/weft"}, "--weft /nonexistent/weft"},
		{[]string{"--codex", "/nonexistent/codex"}, "--codex /nonexistent/codex"},
		{[]string{"--only", "("}, "--only"},
		{[]string{"--frobnicate"}, "unknown flag"},
	} {
		c, _, _, errb := benchCommand(t, tc.args...)
		if code := exitCode(t, c.Run()); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("weft-bench %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, errb.String(), exitUsage, tc.want)
		}
	}
}

// TestList checks --list: every figure, and nothing measured.
func TestList(t *testing.T) {
	c, _, out, errb := benchCommand(t, "--list")
	if err := c.Run(); err != nil {
		t.Fatalf("weft-bench --list: %v\n%s", err, errb.String())
	}
	for _, f := range bench.Figures() {
		if !strings.Contains(out.String(), f[0]+" ") || !strings.Contains(out.String(), f[1]) {
			t.Errorf("--list lacks %s:\n%s", f[0], out.String())
		}
	}
	if errb.Len() > 0 {
		t.Errorf("stderr: %s", errb.String())
	}
}

// TestInterrupt sends SIGINT while a figure runs a `weft serve` child: the
// bench exits 130 after it has killed its children and removed its files.
func TestInterrupt(t *testing.T) {
	c, dir, _, _ := benchCommand(t, "--codex", "none", "--only", "^host-rss$")
	c.Stderr = nil
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "bench: host-rss: ") {
			break
		}
	}
	// The figure has started its first `weft serve`; give it the moment
	// it needs to be serving turns, so that the interrupt finds a child.
	deadline := time.Now().Add(10 * time.Second)
	for len(childrenIn(t, dir)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if runtime.GOOS == "linux" && len(childrenIn(t, dir)) == 0 {
		c.Process.Kill()
		t.Fatalf("no weft serve child within 10 s; stderr:\n%s", strings.Join(lines, "\n"))
	}
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if code := exitCode(t, c.Wait()); code != exitCancelled {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitCancelled, strings.Join(lines, "\n"))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "interrupted; cleaning up") {
		t.Errorf("stderr does not say it was interrupted:\n%s", strings.Join(lines, "\n"))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "weft-bench-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if pids := childrenIn(t, dir); len(pids) > 0 {
		t.Errorf("processes left running in %s: %v", dir, pids)
	}
}

// childrenIn returns the processes whose working directory is under dir
// (none where there is no /proc to tell).
func childrenIn(t *testing.T, dir string) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && strings.HasPrefix(cwd, dir+string(filepath.Separator)) {
			out = append(out, e.Name())
		}
	}
	return out
}
