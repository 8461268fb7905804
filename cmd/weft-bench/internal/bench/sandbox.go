package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"weft.dev/weft/env/sandbox"
)

// sandboxResult is what measureSandboxStart measured.
type sandboxResult struct {
	plain, boxed samples
	status       string
}

// measureSandboxStart starts `sh -c true` to its exit n times plainly
// (os/exec) and n times through sandbox.Command (this machine's
// containment, under Landlock when the kernel has it), alternately, after
// one untimed start of each. Where a command runs under the sandbox's
// helper, the helper is the binary helper (the weft binary, whose helper
// users get), or this process's executable when helper is empty; either
// one's main must call sandbox.Main.
func measureSandboxStart(ctx context.Context, dir, helper string, n int) (*sandboxResult, error) {
	work, tmp := filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{work, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cfg := sandbox.Config{TempRoot: tmp, Executable: helper}
	if abi, _ := sandbox.Probe(); abi == 0 {
		cfg.Unsandboxed = true
	}
	p := sandbox.Policy{Config: cfg, Mounts: []sandbox.Mount{{Path: work, Write: true}}}
	res := &sandboxResult{status: cfg.Status().String()}
	plain := func() (time.Duration, error) {
		t0 := time.Now()
		c := exec.CommandContext(ctx, "/bin/sh", "-c", "true")
		c.Dir = work
		if err := c.Run(); err != nil {
			return 0, fmt.Errorf("sh -c true: %w", err)
		}
		return time.Since(t0), nil
	}
	boxed := func() (time.Duration, error) {
		t0 := time.Now()
		c, err := sandbox.Command(ctx, p, "/bin/sh", "-c", "true")
		if err != nil {
			return 0, err
		}
		c.Dir = work
		if err := c.Run(); err != nil {
			return 0, fmt.Errorf("sandboxed sh -c true: %w", err)
		}
		return time.Since(t0), nil
	}
	for i := range n + 1 {
		a, err := plain()
		if err != nil {
			return nil, err
		}
		b, err := boxed()
		if err != nil {
			return nil, err
		}
		if i > 0 {
			res.plain, res.boxed = append(res.plain, a), append(res.boxed, b)
		}
	}
	return res, nil
}

func runSandboxStart(ctx context.Context, r *runner) error {
	dir, err := r.tempDir("sandbox")
	if err != nil {
		return err
	}
	res, err := measureSandboxStart(ctx, dir, r.cfg.Weft, r.sz.sandboxStarts)
	if err != nil {
		return err
	}
	helper := "the weft binary"
	if r.cfg.Weft == "" {
		helper = "weft-bench itself (no weft binary given)"
	}
	extra := res.boxed.median() - res.plain.median()
	r.add(Result{
		Name:    "sandboxed shell start, extra",
		Result:  fmt.Sprintf("+%s (%s vs %s plain)", fmtDur(extra), fmtDur(res.boxed.median()), fmtDur(res.plain.median())),
		Target:  "≤ 1 ms",
		Verdict: verdict(extra <= time.Millisecond),
		Note:    fmt.Sprintf("sh -c true, start to exit, medians of %d alternating starts; sandbox: %s; helper, where one runs: %s", len(res.plain), res.status, helper),
		Values:  map[string]float64{"extra_ms": ms(extra), "sandboxed_ms": ms(res.boxed.median()), "plain_ms": ms(res.plain.median())},
	})
	r.addPlot("sandbox-start", "Shell start to exit: plain and sandboxed", series{"plain", res.plain}, series{"sandboxed", res.boxed})
	return nil
}
