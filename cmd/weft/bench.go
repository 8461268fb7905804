package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"weft.dev/weft/internal/bench"
)

// benchCmd is `weft bench`: the performance suite on this machine.
type benchCmd struct {
	JSON  bool   `name:"json" help:"Print the report as JSON."`
	Only  string `help:"Run only the figures whose name matches this regular expression (see --list)." placeholder:"REGEX"`
	Quick bool   `help:"Small counts: seconds instead of minutes, for CI and tests; the figures are then not comparable with the targets."`
	Plots string `help:"Write the latency distributions as PNG files into this directory." placeholder:"DIR"`
	Codex string `help:"The codex binary to compare with (default: codex on PATH); 'none' leaves Codex out." placeholder:"PATH"`
	List  bool   `help:"List the figures and exit."`
}

func (c *benchCmd) Run(ctx context.Context, a *app) error {
	if c.List {
		for _, f := range bench.Figures() {
			fmt.Fprintf(a.stdout, "%-14s %s\n", f[0], f[1])
		}
		return nil
	}
	cfg := bench.Config{Quick: c.Quick, Progress: a.stderr}
	if c.Only != "" {
		re, err := regexp.Compile(c.Only)
		if err != nil {
			return usageErr("--only: %v", err)
		}
		cfg.Only = re
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: find the weft binary: %w", err)
	}
	cfg.Weft = exe
	switch c.Codex {
	case "none":
	case "":
		if p, err := exec.LookPath("codex"); err == nil {
			cfg.Codex = p
		}
	default:
		p, err := exec.LookPath(c.Codex)
		if err != nil {
			return usageErr("--codex %s: %v", c.Codex, err)
		}
		cfg.Codex = p
	}
	// Ctrl-C (or SIGTERM) cancels the run; the bench then kills its
	// children and removes its files before it returns.
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	defer func() {
		cancel()
		<-stopped
	}()
	go func() {
		defer close(stopped)
		select {
		case <-a.interrupts:
			fmt.Fprintln(a.stderr, "weft bench: interrupted; cleaning up")
			cancel()
		case <-ctx.Done():
		}
	}()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return &exitError{code: exitCancelled}
		}
		return err
	}
	if c.Plots != "" {
		files, err := rep.WritePlots(c.Plots)
		if err != nil {
			return err
		}
		if len(files) > 0 {
			fmt.Fprintf(a.stderr, "bench: plots: %s\n", strings.Join(files, ", "))
		}
	}
	if c.JSON {
		err = rep.WriteJSON(a.stdout)
	} else {
		err = rep.WriteTable(a.stdout)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return &exitError{code: exitFailed}
	}
	return nil
}
