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
	plain, boxed, contained samples
	status                  string
}

// measureSandboxStart starts `sh -c true` to its exit n times plainly
// (os/exec), n times through sandbox.Command as a session's command of
// weft's host (this machine's containment, under Landlock when the kernel
// has it, the network denied and the default limits) and n times
// unsandboxed but contained, alternately, after one untimed start of
// each. Where a command runs under the sandbox's helper, the helper is the
// binary helper (the weft binary, whose helper users get), or this
// process's executable when helper is empty; either one's main must call
// sandbox.Main.
func measureSandboxStart(ctx context.Context, dir, helper string, n int) (*sandboxResult, error) {
	work, tmp := filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{work, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	limits, ses, host := sandbox.DefaultLimits(sandbox.MachineMemory())
	sessions, err := sandbox.NewSessions(sandbox.SessionsConfig{Session: ses, Host: host})
	if err != nil {
		return nil, err
	}
	defer sessions.Close()
	cfg := sandbox.Config{TempRoot: tmp, Executable: helper, Limits: limits, Sessions: sessions}
	if abi, _ := sandbox.Probe(); abi == 0 {
		cfg.Unsandboxed = true
	}
	p := sandbox.Policy{Config: cfg, Mounts: []sandbox.Mount{{Path: work, Write: true}}, Session: "ses_bench"}
	cp := sandbox.Policy{Config: sandbox.Config{TempRoot: tmp, Executable: helper, Unsandboxed: true}, Mounts: p.Mounts}
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
	start := func(p sandbox.Policy) (time.Duration, error) {
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
		b, err := start(p)
		if err != nil {
			return nil, err
		}
		c, err := start(cp)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			res.plain, res.boxed, res.contained = append(res.plain, a), append(res.boxed, b), append(res.contained, c)
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
		Name: "sandboxed shell start, extra",
		Result: fmt.Sprintf("+%s (%s vs %s plain, %s unsandboxed contained)", fmtDur(extra), fmtDur(res.boxed.median()),
			fmtDur(res.plain.median()), fmtDur(res.contained.median())),
		Target:  "≤ 2 ms",
		Verdict: verdict(extra <= 2*time.Millisecond),
		Note:    fmt.Sprintf("sh -c true, start to exit, medians of %d alternating starts; a session's command (its network namespace, cgroups, default limits); sandbox: %s; helper, where one runs: %s", len(res.plain), res.status, helper),
		Values: map[string]float64{"extra_ms": ms(extra), "sandboxed_ms": ms(res.boxed.median()), "plain_ms": ms(res.plain.median()),
			"contained_ms": ms(res.contained.median())},
	})
	r.addPlot("sandbox-start", "Shell start to exit: plain, contained and sandboxed", series{"plain", res.plain}, series{"contained", res.contained}, series{"sandboxed", res.boxed})
	return nil
}
