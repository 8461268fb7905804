package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Config configures [Run]. The zero value runs every in-process figure at
// full size; the process figures need Weft, Codex's side needs Codex.
type Config struct {
	// Weft is the weft binary that the process figures run (the one-shot
	// run, the warm turns through `weft rpc`, the host's memory through
	// `weft serve`). Empty skips those figures.
	Weft string
	// Codex is the codex binary measured beside weft in the warm-turn and
	// one-shot figures. Empty skips Codex's side, and the verdicts that
	// need it.
	Codex string
	// Only selects the figures whose name it matches (see [Figures]); nil
	// means all.
	Only *regexp.Regexp
	// Quick runs every figure with small counts: seconds instead of
	// minutes, for tests and CI. The figures are then not comparable with
	// their targets, which the report says.
	Quick bool
	// TempDir is where the bench makes its temporary directory; empty
	// means os.TempDir().
	TempDir string
	// Progress, if set, receives one line as each figure starts and ends.
	Progress io.Writer
}

// Verdict says how a result compares with its target.
type Verdict string

// Verdicts.
const (
	Met     Verdict = "met"
	Missed  Verdict = "missed"
	Skipped Verdict = "skipped" // could not be measured here; Note says why
	Failed  Verdict = "failed"  // the measurement failed; Note has the error
	Info    Verdict = "info"    // measured and reported; the issue sets no target
)

// Result is one row of the report: a figure, its value, its target and
// the verdict.
type Result struct {
	// Figure is the name of the figure that produced the row (what
	// Config.Only matches).
	Figure string `json:"figure"`
	// Name says what the row measures.
	Name string `json:"name"`
	// Result is the measured value as text, with what it is compared to.
	Result string `json:"result"`
	// Target is the goal, as text.
	Target  string  `json:"target"`
	Verdict Verdict `json:"verdict"`
	// Note explains a skip or a failure, or adds context.
	Note string `json:"note,omitempty"`
	// Values are the numbers behind Result, keyed by name and unit
	// (e.g. "weft_p50_ms", "codex_p50_ms").
	Values map[string]float64 `json:"values,omitempty"`
}

// Report is what [Run] measured.
type Report struct {
	// Machine describes where it ran.
	Machine Machine `json:"machine"`
	// Quick is Config.Quick: the counts were small.
	Quick   bool     `json:"quick"`
	Results []Result `json:"results"`
	// Duration is the time the whole run took.
	Duration time.Duration `json:"durationNs"`

	plots []chart
}

// Machine describes the machine and the load on it.
type Machine struct {
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu,omitempty"`
	Kernel string `json:"kernel,omitempty"`
	Go     string `json:"go"`
	// Weft is the first line of `weft version` of the binary measured
	// (Config.Weft), Codex that of `codex --version`.
	Weft      string `json:"weft,omitempty"`
	Codex     string `json:"codex,omitempty"`
	LoadStart string `json:"loadStart,omitempty"`
	LoadEnd   string `json:"loadEnd,omitempty"`
}

// Failed reports whether any figure failed to measure.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Verdict == Failed {
			return true
		}
	}
	return false
}

// figure is one measurement of the suite; run adds its rows to r.
type figure struct {
	name string
	what string
	run  func(ctx context.Context, r *runner) error
}

// figures returns the suite, in the order it runs.
func figures() []figure {
	return []figure{
		{"oneshot", "one-shot `weft run` against `codex exec`", runOneShot},
		{"startup", "the weft binary's size and start-up, by dependency", runStartup},
		{"warm-turn", "warm turns over stdio JSON-RPC against `codex app-server`", runWarmTurns},
		{"run-start", "run start in a long session", runRunStart},
		{"idle-sessions", "memory of idle loaded sessions", runIdleSessions},
		{"host-rss", "`weft serve` memory over many turns", runHostRSS},
		{"fanout-inproc", "fan-out to in-process subscribers", runFanoutInProcess},
		{"fanout-wire", "fan-out to WebSocket and SSE subscribers", runFanoutWire},
		{"append", "event append against raw SQLite", runAppend},
		{"sandbox-start", "sandboxed shell start", runSandboxStart},
	}
}

// Figures lists the names of the figures, in the order Run runs them, with
// what each measures.
func Figures() [][2]string {
	var out [][2]string
	for _, f := range figures() {
		out = append(out, [2]string{f.name, f.what})
	}
	return out
}

// sizes are the counts of one run of the suite.
type sizes struct {
	oneshotPairs    int // weft run / codex exec pairs
	startupRuns     int // timed runs of weft version
	inittraceRuns   int // runs of weft version under GODEBUG=inittrace=1
	turns1, turns10 int // weft turns: 1 session; per session of 10
	// Codex's turns, the same shapes. codex10 is turns10: a round's rate
	// runs to the last session's last turn, so fewer turns a session would
	// weigh Codex's tail more than weft's.
	codex1, codex10   int
	historyEvents     int // events in the long session of run-start
	runStarts         int // runs of each session measured warm: enough for a p99
	idleSessions      int
	rssFirst, rssLast int           // turns before the two RSS readings
	rssPerSession     int           // turns per session in host-rss
	rssIdle           time.Duration // the pause before host-rss's idle readings
	fanoutSubs        int
	fanoutRuns        int // runs with and without subscribers each
	fanoutSteps       int // tool-calling steps of a fan-out run
	wireSubs          int
	wireRuns          int
	appendRounds      int
	append1, append64 int // batches per round
	sandboxStarts     int
}

// sizesFor returns the counts of a full run, or of a quick one.
func sizesFor(quick bool) sizes {
	if quick {
		return sizes{
			oneshotPairs: 2, startupRuns: 3, inittraceRuns: 2, turns1: 10, turns10: 3, codex1: 3, codex10: 3,
			historyEvents: 2_000, runStarts: 3, idleSessions: 100,
			rssFirst: 10, rssLast: 40, rssPerSession: 10, rssIdle: 100 * time.Millisecond,
			fanoutSubs: 20, fanoutRuns: 1, fanoutSteps: 4, wireSubs: 5, wireRuns: 1,
			appendRounds: 1, append1: 50, append64: 10, sandboxStarts: 3,
		}
	}
	return sizes{
		oneshotPairs: 10, startupRuns: 20, inittraceRuns: 10, turns1: 200, turns10: 20, codex1: 30, codex10: 20,
		historyEvents: 100_000, runStarts: 200, idleSessions: 100_000,
		rssFirst: 100, rssLast: 10_000, rssPerSession: 100, rssIdle: 5 * time.Second,
		fanoutSubs: 1000, fanoutRuns: 3, fanoutSteps: 39, wireSubs: 100, wireRuns: 3,
		appendRounds: 5, append1: 1000, append64: 200, sandboxStarts: 40,
	}
}

// runner carries what the figures of one Run share.
type runner struct {
	cfg    Config
	sz     sizes
	dir    string // the bench's temporary directory
	mock   *mockModel
	report *Report
	figure string // the figure running
}

// Run measures the figures cfg selects and returns the report. It fails
// only when it cannot start (no temporary directory, no loopback port) or
// ctx ends; a figure that fails is a row with verdict Failed. Every child
// process and temporary file is gone when it returns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	dir, err := os.MkdirTemp(cfg.TempDir, "weft-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	mock, err := startMock()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer mock.Close()
	r := &runner{cfg: cfg, sz: sizesFor(cfg.Quick), dir: dir, mock: mock, report: &Report{Quick: cfg.Quick, Machine: machine(ctx, cfg)}}
	for _, f := range figures() {
		if cfg.Only != nil && !cfg.Only.MatchString(f.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		r.progress("%s: %s …", f.name, f.what)
		t0 := time.Now()
		r.figure = f.name
		n := len(r.report.Results)
		err := runFigure(ctx, f, r)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bench: %s: %w", f.name, ctx.Err())
		}
		if err != nil {
			r.add(Result{Name: f.what, Verdict: Failed, Note: err.Error()})
		}
		for _, res := range r.report.Results[n:] {
			r.progress("  %-44s %s [%s]", res.Name, res.Result, res.Verdict)
		}
		r.progress("%s: done in %s", f.name, fmtDur(time.Since(t0)))
	}
	r.report.Machine.LoadEnd = loadAvg()
	r.report.Duration = time.Since(start)
	return r.report, nil
}

// runFigure runs f, turning a panic into its error.
func runFigure(ctx context.Context, f figure, r *runner) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f.run(ctx, r)
}

// add appends a row for the running figure.
func (r *runner) add(res Result) {
	res.Figure = r.figure
	r.report.Results = append(r.report.Results, res)
}

// skip adds a skipped row.
func (r *runner) skip(name, target, why string) {
	r.add(Result{Name: name, Result: "—", Target: target, Verdict: Skipped, Note: why})
}

// tempDir makes a directory for one part of a figure.
func (r *runner) tempDir(name string) (string, error) {
	d, err := os.MkdirTemp(r.dir, name+"-")
	if err != nil {
		return "", fmt.Errorf("temp dir: %w", err)
	}
	return d, nil
}

func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "bench: "+format+"\n", args...)
	}
}

// needWeft returns why the process figures cannot run, or "".
func (r *runner) needWeft() string {
	if r.cfg.Weft == "" {
		return "no weft binary to run (weft-bench --weft PATH)"
	}
	return ""
}

// codexMissing is the note of a Codex row that cannot run.
const codexMissing = "codex not found: install it with `npm install -g @openai/codex`, or pass --codex PATH"

// joinNotes joins the non-empty notes with "; ".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// verdict returns Met when ok, else Missed.
func verdict(ok bool) Verdict {
	if ok {
		return Met
	}
	return Missed
}

// machine describes this machine and the programs cfg measures.
func machine(ctx context.Context, cfg Config) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	m.Weft = programVersion(ctx, cfg.Weft, "version")
	m.Codex = programVersion(ctx, cfg.Codex, "--version")
	return m
}

// programVersion returns the first line that the program at path prints
// when run with arg, or "" when path is empty or it fails within 10 s.
func programVersion(ctx context.Context, path, arg string) string {
	if path == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := command(ctx, os.Environ(), "", path, arg).Output()
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return first
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
