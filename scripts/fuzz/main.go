// Command fuzz runs every fuzz target of the given packages for a short
// budget each: the last stage of scripts/test. It never hides a failure:
// a target that fails has its whole output printed, then each failing
// input the fuzzing engine wrote (testdata/fuzz/TARGET/NAME) with the
// command that reruns it, and that rerun's result. It exits 1 when a
// target failed.
//
//	go run ./scripts/fuzz [-fuzztime 3s] [-go go] [packages]   (default ./...)
//
// One failure is not a target's: Go 1.26's fuzzing coordinator may end a
// run that reached its -fuzztime with "context deadline exceeded"
// (go.dev/issue/75804, fixed in Go 1.27). The deadline closes the done
// channel of the coordinator's context before it cancels the workers'
// context, and the check that suppresses the deadline compares against
// the workers' context, so on a loaded machine, where the coordinator's
// goroutine runs in that window, the deadline is reported as the
// target's failure. The run had then used its whole budget and stopped
// taking results, exactly as it does without the race, and no failing
// input was written; such a run is reported as passed, with a note and
// its output. A run that wrote a failing input is a failure whatever its
// message says (the coordinator writes an input it was minimising when
// the deadline came, under the same message).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	fuzztime := flag.String("fuzztime", "3s", "the budget of each target: a duration (3s) or a count of executions (10000x)")
	goCmd := flag.String("go", "go", "the go command")
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	r := runner{goCmd: *goCmd, fuzztime: *fuzztime, out: os.Stdout}
	os.Exit(r.run(pkgs))
}

// runner runs fuzz targets with one go command and budget, printing to
// out.
type runner struct {
	goCmd, fuzztime string
	out             io.Writer
}

// target is one fuzz target.
type target struct {
	pkg, dir, name string
}

// run fuzzes every target of pkgs and returns the exit status.
func (r runner) run(pkgs []string) int {
	targets, err := r.targets(pkgs)
	if err != nil {
		fmt.Fprintln(r.out, "fuzz:", err)
		return 1
	}
	var failed []string
	for _, t := range targets {
		if !r.fuzz(t) {
			failed = append(failed, t.pkg+" "+t.name)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(r.out, "fuzz: %d of %d targets failed:\n", len(failed), len(targets))
		for _, f := range failed {
			fmt.Fprintln(r.out, "  "+f)
		}
		return 1
	}
	fmt.Fprintf(r.out, "fuzz: %d targets passed (%s each)\n", len(targets), r.fuzztime)
	return 0
}

// fuzzFuncRe matches the declaration of a fuzz target.
var fuzzFuncRe = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]*)\(`)

// targets lists the fuzz targets of pkgs, in package order.
func (r runner) targets(pkgs []string) ([]target, error) {
	args := append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .TestGoFiles \" \"}} {{join .XTestGoFiles \" \"}}"}, pkgs...)
	out, err := exec.Command(r.goCmd, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list: %v\n%s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list: %w", err)
	}
	var ts []target
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimRight(line, "\n"), "\t", 3)
		if len(f) != 3 {
			continue
		}
		var names []string
		for file := range strings.FieldsSeq(f[2]) {
			b, err := os.ReadFile(filepath.Join(f[1], file))
			if err != nil {
				return nil, err
			}
			for _, m := range fuzzFuncRe.FindAllSubmatch(b, -1) {
				names = append(names, string(m[1]))
			}
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			ts = append(ts, target{pkg: f[0], dir: f[1], name: n})
		}
	}
	return ts, nil
}

// fuzz runs one target and reports whether it passed.
func (r runner) fuzz(t target) bool {
	corpus := filepath.Join(t.dir, "testdata", "fuzz", t.name)
	before := listDir(corpus)
	cmd := exec.Command(r.goCmd, "test", "-run", "^$", "-fuzz", "^"+t.name+"$", "-fuzztime", r.fuzztime, t.pkg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var written []string
	for _, f := range listDir(corpus) {
		if !slices.Contains(before, f) {
			written = append(written, f)
		}
	}
	switch verdict := judge(t.name, err == nil, out.Bytes(), written); verdict {
	case passed:
		fmt.Fprintf(r.out, "-- %s %s: ok%s\n", t.pkg, t.name, execs(out.Bytes()))
		return true
	case deadlineRace:
		fmt.Fprintf(r.out, "-- %s %s: ok%s; the fuzzing engine reported its own -fuzztime deadline as a failure after the whole budget, with no failing input (go.dev/issue/75804, fixed in Go 1.27); its output:\n", t.pkg, t.name, execs(out.Bytes()))
		r.indent(out.Bytes(), "    ")
		return true
	default:
		fmt.Fprintf(r.out, "-- %s %s: FAIL\n", t.pkg, t.name)
		r.indent(out.Bytes(), "    ")
		if err != nil && out.Len() == 0 {
			fmt.Fprintf(r.out, "    %s test: %v\n", r.goCmd, err)
		}
		for _, name := range written {
			path := filepath.Join(corpus, name)
			if rel, err := filepath.Rel(mustGetwd(), path); err == nil {
				path = rel
			}
			fmt.Fprintf(r.out, "  failing input: %s\n", path)
			r.rerun(t, name)
		}
		return false
	}
}

// rerun runs the failing input name of t alone and prints the command and
// its result, so that a reader can tell an input that fails every time
// from a run the machine's load made hang (the engine gives an input 10s).
func (r runner) rerun(t target, name string) {
	run := "^" + t.name + "$/^" + name + "$"
	fmt.Fprintf(r.out, "  rerun: go test -run '%s' %s\n", run, t.pkg)
	out, err := exec.Command(r.goCmd, "test", "-count=1", "-run", run, t.pkg).CombinedOutput()
	result := "passes alone now (a hang under load, or a failure that depends on earlier inputs)"
	if err != nil {
		result = "fails again"
	}
	fmt.Fprintf(r.out, "  rerun %s:\n", result)
	r.indent(out, "      ")
}

// indent prints b to r.out with each line after prefix.
func (r runner) indent(b []byte, prefix string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fmt.Fprintf(r.out, "%s%s\n", prefix, sc.Text())
	}
}

// verdict is how a fuzz run ended.
type verdict int

const (
	passed verdict = iota
	// deadlineRace: the run's only failure is go.dev/issue/75804.
	deadlineRace
	failed
)

// judge says how the run of target name ended, from whether go test
// succeeded, its output, and the failing inputs it wrote.
func judge(name string, ok bool, out []byte, written []string) verdict {
	if ok {
		return passed
	}
	if len(written) > 0 || bytes.Contains(out, []byte("Failing input written to")) {
		return failed
	}
	msgs := failureMessages(name, out)
	if len(msgs) == 1 && msgs[0] == "context deadline exceeded" {
		return deadlineRace
	}
	return failed
}

// failureMessages returns the indented lines go test printed under
// "--- FAIL: name (…)", trimmed; nil if there is no such line.
func failureMessages(name string, out []byte) []string {
	var msgs []string
	in := false
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "--- FAIL: "+name+" "):
			if in {
				return nil // two failures: not the race alone
			}
			in = true
		case in && (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")):
			msgs = append(msgs, strings.TrimSpace(line))
		case in:
			in = false
		}
	}
	return msgs
}

// execsRe matches the fuzzing engine's progress line.
var execsRe = regexp.MustCompile(`execs: (\d+)`)

// execs is ", N execs" from the last progress line of out, or "".
func execs(out []byte) string {
	m := execsRe.FindAllSubmatch(out, -1)
	if len(m) == 0 {
		return ""
	}
	return fmt.Sprintf(", %s execs", m[len(m)-1][1])
}

// listDir lists the names in dir; nil when it does not exist.
func listDir(dir string) []string {
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}
