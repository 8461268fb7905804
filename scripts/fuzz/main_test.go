package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// raceOutput is what Go 1.26 printed for go.dev/issue/75804 (FuzzResolve
// on a loaded 2-core machine, -fuzztime 3s).
const raceOutput = `fuzz: elapsed: 0s, gathering baseline coverage: 0/332 completed
fuzz: elapsed: 1s, gathering baseline coverage: 332/332 completed, now fuzzing with 2 workers
fuzz: elapsed: 3s, execs: 25315 (8438/sec), new interesting: 3 (total: 335)
fuzz: elapsed: 4s, execs: 25315 (0/sec), new interesting: 3 (total: 335)
--- FAIL: FuzzResolve (4.03s)
    context deadline exceeded
FAIL
exit status 1
FAIL	weft.dev/weft/env	4.043s
`

func TestJudge(t *testing.T) {
	crash := strings.Replace(raceOutput, "    context deadline exceeded\n",
		"    --- FAIL: FuzzResolve (0.00s)\n        x_test.go:9: boom\n    \n    Failing input written to testdata/fuzz/FuzzResolve/0123abcd\n    To re-run:\n    go test -run=FuzzResolve/0123abcd\n", 1)
	hung := strings.Replace(raceOutput, "    context deadline exceeded\n", "    fuzzing process hung or terminated unexpectedly: exit status 2\n", 1)
	for _, tc := range []struct {
		name    string
		ok      bool
		out     string
		written []string
		want    verdict
	}{
		{"passed", true, "ok  \tweft.dev/weft/env\t4s\n", nil, passed},
		{"deadline race", false, raceOutput, nil, deadlineRace},
		// The coordinator writes an input it was minimising when the
		// deadline came, under the same message: a failure.
		{"deadline with an input written", false, raceOutput, []string{"0123abcd"}, failed},
		{"crash", false, crash, []string{"0123abcd"}, failed},
		{"crash message without a new file", false, crash, nil, failed},
		{"hung worker", false, hung, nil, failed},
		{"build failure", false, "# weft.dev/weft/env\nenv/x.go:1:1: syntax error\nFAIL\tweft.dev/weft/env [build failed]\n", nil, failed},
		{"another target's failure", false, strings.ReplaceAll(raceOutput, "FuzzResolve", "FuzzOther"), nil, failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge("FuzzResolve", tc.ok, []byte(tc.out), tc.written); got != tc.want {
				t.Errorf("judge = %d, want %d", got, tc.want)
			}
		})
	}
	if got := execs([]byte(raceOutput)); got != ", 25315 execs" {
		t.Errorf("execs = %q", got)
	}
}

// TestFailingTargetIsShown fuzzes a module whose target fails on every
// input but its seed: the run fails, prints the engine's output, the
// failing input it wrote and the rerun of that input. (scripts/test sent
// all of it to /dev/null.)
func TestFailingTargetIsShown(t *testing.T) {
	goCmd := testenv.Command(t, "go")
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/fz\n\ngo 1.26\n")
	write("fz_test.go", `package fz

import "testing"

func TestOK(t *testing.T) {}

func FuzzBoom(f *testing.F) {
	f.Add("a")
	f.Fuzz(func(t *testing.T, s string) {
		if s != "a" {
			t.Fatalf("boom on %q", s)
		}
	})
}
`)
	t.Chdir(dir)
	var out strings.Builder
	r := runner{goCmd: goCmd, fuzztime: "30s", out: &out}
	code := r.run([]string{"./..."})
	got := out.String()
	t.Logf("output:\n%s", got)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"-- example.com/fz FuzzBoom: FAIL\n",
		"boom on",                                // the engine's output
		"failing input: testdata/fuzz/FuzzBoom/", // the path, relative
		"rerun: go test -run '^FuzzBoom$/^",      // how to rerun it
		"rerun fails again:",                     // and that it does
		"fuzz: 1 of 1 targets failed:\n  example.com/fz FuzzBoom\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "testdata", "fuzz", "FuzzBoom", "*"))
	if len(files) != 1 {
		t.Errorf("failing inputs written: %v", files)
	}
}
