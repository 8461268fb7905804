package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"weft.dev/weft/internal/bench"
)

// TestBenchQuickJSON runs `weft bench --quick --json` (without Codex) and
// checks that every figure measured something: the process figures run
// this binary as `weft run`, `weft rpc` and `weft serve`.
func TestBenchQuickJSON(t *testing.T) {
	dir := t.TempDir()
	plots := filepath.Join(dir, "plots")
	c := exec.Command(weftBin, "bench", "--quick", "--json", "--codex", "none", "--plots", plots)
	c.Dir = dir
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	t0 := time.Now()
	if err := c.Run(); err != nil {
		t.Fatalf("weft bench: %v\n%s", err, errb.String())
	}
	t.Logf("weft bench --quick took %s", time.Since(t0))
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not a report: %v\n%s", err, out.String())
	}
	if !rep.Quick {
		t.Error("report not marked quick")
	}
	rows := map[string]int{}
	for _, res := range rep.Results {
		rows[res.Figure]++
		switch {
		case res.Verdict == bench.Failed:
			t.Errorf("%s: %s failed: %s", res.Figure, res.Name, res.Note)
		case res.Verdict == bench.Skipped && res.Figure != "oneshot" && res.Figure != "warm-turn":
			t.Errorf("%s: %s skipped: %s", res.Figure, res.Name, res.Note)
		case len(res.Values) == 0:
			t.Errorf("%s: %s: no values", res.Figure, res.Name)
		}
	}
	for _, f := range bench.Figures() {
		if rows[f[0]] == 0 {
			t.Errorf("figure %s: no result", f[0])
		}
	}
	if ents, err := os.ReadDir(plots); err != nil || len(ents) < 5 {
		t.Errorf("plots: %d files, %v", len(ents), err)
	}
	// Nothing left behind: the bench's temporary directory is gone.
	left, _ := filepath.Glob(filepath.Join(dir, "weft-bench-*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
