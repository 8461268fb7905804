// Command testlog reads the output of go test -json on its standard input
// and prints what go test prints without -json or -v: a line per package,
// and the output of every test that failed. At the end it lists the tests
// that were skipped, each with its reason. It exits 1 when a test or a
// package failed, when nothing was tested, and, under CI (the environment
// variable CI set and not false), when any test was skipped: CI machines
// have everything the tests need (internal/testenv), so a skip there is a
// test that has quietly stopped testing. scripts/test pipes the test run
// through it:
//
//	go test -json ./... | go run ./scripts/testlog
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// skip is a skipped test and why.
type skip struct {
	pkg, test, reason string
}

// report is what testlog learned from a stream.
type report struct {
	failed   bool // a test, a package or a build failed
	packages int  // packages that ended (passed, failed or had no tests)
	skips    []skip
}

func main() {
	r, err := copyLog(os.Stdout, os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(1)
	}
	os.Exit(r.summary(os.Stdout, ci()))
}

// ci reports whether CI is set, as internal/testenv reads it.
func ci() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// copyLog reads the events from in and writes to out what go test would
// print: package lines as they come, a failed test's output when it
// ends, lines that are not JSON as they are.
func copyLog(out io.Writer, in io.Reader) (report, error) {
	var r report
	// The output of each running test, by package and test, until the
	// test ends; tests of parallel packages interleave.
	pending := map[[2]string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line) // go's own messages
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			r.failed = true
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" { // printed by -v only
				fmt.Fprint(out, e.Output) // ok, FAIL, coverage lines
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			r.packages++
			if e.Action == "fail" {
				// A test binary that panicked or timed out leaves
				// tests that never ended: show what they printed.
				r.failed = true
				var tests []string
				for k := range pending {
					if k[0] == e.Package {
						tests = append(tests, k[1])
					}
				}
				slices.Sort(tests)
				for _, test := range tests {
					k := [2]string{e.Package, test}
					for _, l := range pending[k] {
						fmt.Fprint(out, l)
					}
					delete(pending, k)
				}
			}
		case e.Action == "output":
			pending[key] = append(pending[key], e.Output)
		case e.Action == "fail":
			r.failed = true
			for _, l := range pending[key] {
				fmt.Fprint(out, l)
			}
			delete(pending, key)
		case e.Action == "skip":
			r.skips = append(r.skips, skip{e.Package, e.Test, reason(pending[key])})
			delete(pending, key)
		case e.Action == "pass":
			delete(pending, key)
		}
	}
	return r, sc.Err()
}

// reason is what a skipped test printed, without the lines go test adds.
func reason(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" / ")
		}
		b.WriteString(t)
	}
	return b.String()
}

// summary lists the skipped tests and returns the exit status.
func (r report) summary(out io.Writer, ci bool) int {
	status := 0
	if r.failed {
		status = 1
	}
	if r.packages == 0 {
		fmt.Fprintln(out, "testlog: no package was tested")
		status = 1
	}
	if len(r.skips) == 0 {
		return status
	}
	slices.SortFunc(r.skips, func(a, b skip) int { return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test) })
	fmt.Fprintf(out, "%d tests skipped:\n", len(r.skips))
	for _, s := range r.skips {
		fmt.Fprintf(out, "  %s %s: %s\n", s.pkg, s.test, s.reason)
	}
	if ci {
		fmt.Fprintln(out, "FAIL: CI is set, and CI machines have everything the tests need: no test may skip there (internal/testenv)")
		status = 1
	}
	return status
}
