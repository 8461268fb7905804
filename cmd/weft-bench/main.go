// Command weft-bench measures weft's performance figures on the machine it
// runs on and prints each with its target and verdict: a table, or JSON
// with --json, and the latency distributions as PNG charts with --plots.
//
// It is a developer's tool beside the product, as pgbench is beside
// PostgreSQL: the weft binary it measures is another program (--weft;
// by default the weft beside weft-bench, else weft on PATH), so the
// product carries none of the harness, its mock model or its plotting
// library. Where Codex is installed, `codex exec` and `codex app-server`
// are measured side by side with weft on the same mock.
//
//	CGO_ENABLED=0 go build -o bin/ ./cmd/weft ./cmd/weft-bench
//	bin/weft-bench --list
//	bin/weft-bench --quick --only 'oneshot|warm-turn'
//	bin/weft-bench --json --plots plots > report.json
//
// Exit codes: 0 when every figure was measured (met, missed, skipped or
// info), 1 when one failed to measure or the bench could not start, 2 on
// a usage error, 130 when interrupted (the bench then stops its children
// and removes its files first).
//
// See BENCHMARKS.md for the figures and saved runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"weft.dev/weft/cmd/weft-bench/internal/bench"
	"weft.dev/weft/env/sandbox"
)

// Exit codes.
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitCancelled = 130
)

// cli is the command line.
type cli struct {
	JSON  bool   `name:"json" help:"Print the report as JSON."`
	Only  string `help:"Run only the figures whose name matches this regular expression (see --list)." placeholder:"REGEX"`
	Quick bool   `help:"Small counts: seconds instead of minutes, for CI and tests; the figures are then not comparable with the targets."`
	Plots string `help:"Write the latency distributions as PNG files into this directory." placeholder:"DIR"`
	Weft  string `help:"The weft binary to measure (default: weft beside weft-bench, else weft on PATH); 'none' leaves out the figures that run it." placeholder:"PATH"`
	Codex string `help:"The codex binary to compare with (default: codex on PATH); 'none' leaves Codex out." placeholder:"PATH"`
	List  bool   `help:"List the figures and exit."`
}

func main() {
	// The sandbox figure's shells may run under a helper: this binary
	// re-executed, when no weft binary is given to play that part.
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args) // never returns
	}
	// The wire fan-out figures' subscribers run in this binary
	// re-executed.
	if bench.IsFanoutClients(os.Args) {
		bench.FanoutClientsMain(os.Args) // never returns
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// usageError is a mistake on the command line: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitPanic carries kong's exit (after --help) out of Parse.
type exitPanic int

// run parses args, runs the bench and returns the exit code. The first
// value on interrupts cancels the run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, interrupts <-chan os.Signal) (code int) {
	var c cli
	parser, err := kong.New(&c,
		kong.Name("weft-bench"),
		kong.Description("Measure weft's performance figures on this machine (and Codex's, side by side, when installed)."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitPanic(code)) }),
		kong.UsageOnError(),
	)
	if err != nil {
		fmt.Fprintln(stderr, "weft-bench:", err)
		return exitFailed
	}
	defer func() {
		if r := recover(); r != nil {
			p, ok := r.(exitPanic)
			if !ok {
				panic(r)
			}
			code = int(p)
		}
	}()
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintln(stderr, "weft-bench:", err)
		return exitUsage
	}
	err = c.run(ctx, stdout, stderr, interrupts)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errFailed):
		return exitFailed
	case errors.Is(err, context.Canceled):
		return exitCancelled
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "weft-bench:", err)
		return exitUsage
	}
	fmt.Fprintln(stderr, "weft-bench:", err)
	return exitFailed
}

// errFailed says that a figure failed to measure; the report says which.
var errFailed = errors.New("a figure failed")

func (c *cli) run(ctx context.Context, stdout, stderr io.Writer, interrupts <-chan os.Signal) error {
	if c.List {
		for _, f := range bench.Figures() {
			fmt.Fprintf(stdout, "%-14s %s\n", f[0], f[1])
		}
		return nil
	}
	cfg := bench.Config{Quick: c.Quick, Progress: stderr}
	if c.Only != "" {
		re, err := regexp.Compile(c.Only)
		if err != nil {
			return usageErr("--only: %v", err)
		}
		cfg.Only = re
	}
	var err error
	if cfg.Weft, err = findWeft(c.Weft); err != nil {
		return err
	}
	if cfg.Weft == "" && c.Weft == "" {
		fmt.Fprintln(stderr, "weft-bench: no weft binary beside weft-bench or on PATH: the figures that run it are skipped (build one: CGO_ENABLED=0 go build -o weft ./cmd/weft; then --weft ./weft)")
	}
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
		case <-interrupts:
			fmt.Fprintln(stderr, "weft-bench: interrupted; cleaning up")
			cancel()
		case <-ctx.Done():
		}
	}()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if c.Plots != "" {
		files, err := rep.WritePlots(c.Plots)
		if err != nil {
			return err
		}
		if len(files) > 0 {
			fmt.Fprintf(stderr, "weft-bench: plots: %s\n", strings.Join(files, ", "))
		}
	}
	if c.JSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return errFailed
	}
	return nil
}

// findWeft returns the weft binary to measure, as an absolute path: flag
// when given (a path, or a name looked up on PATH), "" for "none", else
// the weft beside this executable, else weft on PATH, else "".
func findWeft(flag string) (string, error) {
	switch flag {
	case "none":
		return "", nil
	case "":
		if self, err := os.Executable(); err == nil {
			p := filepath.Join(filepath.Dir(self), "weft")
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		p, err := exec.LookPath("weft")
		if err != nil {
			return "", nil
		}
		return filepath.Abs(p)
	}
	p, err := exec.LookPath(flag)
	if err != nil {
		return "", usageErr("--weft %s: %v", flag, err)
	}
	return filepath.Abs(p)
}
