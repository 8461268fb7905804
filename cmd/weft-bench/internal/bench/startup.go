package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// initEntry is one line of GODEBUG=inittrace=1: a package's initialisation.
type initEntry struct {
	pkg    string
	at     time.Duration // since the runtime started
	clock  time.Duration // the package's init functions' wall time
	bytes  int64         // heap allocated
	allocs int64
}

var inittraceLine = regexp.MustCompile(`^init (\S+) @([0-9.]+) ms, ([0-9.]+) ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

// parseInittrace returns the inittrace lines of a process's standard
// error; other lines are ignored. It fails on a line that begins like one
// but does not parse.
func parseInittrace(stderr string) ([]initEntry, error) {
	var out []initEntry
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		m := inittraceLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("inittrace: cannot parse %q", line)
		}
		at, err1 := strconv.ParseFloat(m[2], 64)
		clock, err2 := strconv.ParseFloat(m[3], 64)
		b, err3 := strconv.ParseInt(m[4], 10, 64)
		n, err4 := strconv.ParseInt(m[5], 10, 64)
		if err := cmp.Or(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("inittrace: %q: %w", line, err)
		}
		out = append(out, initEntry{pkg: m[1], at: msDur(at), clock: msDur(clock), bytes: b, allocs: n})
	}
	return out, nil
}

func msDur(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// moduleInit is what one module's packages cost at initialisation.
type moduleInit struct {
	module   string
	packages int
	clock    time.Duration
	bytes    int64
}

// initByModule adds up the entries of runs (one slice per process) by
// module and returns the means per process, most expensive first. A
// package of no known module is its own bucket; package main is the main
// module's.
func initByModule(runs [][]initEntry, mods moduleIndex) []moduleInit {
	if len(runs) == 0 {
		return nil
	}
	by := map[string]*moduleInit{}
	for i, run := range runs {
		for _, e := range run {
			mod := mods.pkgModule(e.pkg)
			switch {
			case e.pkg == "main" && mods.main != "":
				mod = mods.main
			case mod == "":
				mod = e.pkg
			}
			m := by[mod]
			if m == nil {
				m = &moduleInit{module: mod}
				by[mod] = m
			}
			if i == 0 {
				m.packages++
			}
			m.clock += e.clock
			m.bytes += e.bytes
		}
	}
	out := make([]moduleInit, 0, len(by))
	for _, m := range by {
		m.clock /= time.Duration(len(runs))
		m.bytes /= int64(len(runs))
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b moduleInit) int {
		return cmp.Or(cmp.Compare(b.clock, a.clock), cmp.Compare(a.module, b.module))
	})
	return out
}

// The start-up targets (issue "Lean and flat"): a command answers in the
// time of a small tool's start, and package initialisation is a small part
// of it. maxLoaded bounds the bytes of the binary mapped from its file: the
// image before the provider SDKs came was 35 MB, they brought it to 78 MB;
// without them it is 29 MB, and the bound leaves room for what the next
// issues add (River, OpenTelemetry) without letting an SDK of that size
// back in unnoticed.
const (
	maxVersionWall = 5 * time.Millisecond
	maxInitClock   = 2 * time.Millisecond
	maxLoaded      = 32_000_000
)

// runStartup reports the weft binary's size and what each module adds to
// it, the wall time of `weft version` from exec to exit, and the package
// initialisation that GODEBUG=inittrace=1 reports, by module.
func runStartup(ctx context.Context, r *runner) error {
	const (
		sizeName = "binary size"
		execName = "start-up: `weft version`, exec to exit"
		initName = "start-up: package initialisation"
	)
	if why := r.needWeft(); why != "" {
		for _, n := range []string{sizeName, execName, initName} {
			r.skip(n, "—", why)
		}
		return nil
	}
	mods, modErr := modulesOf(r.cfg.Weft)
	if bs, err := measureBinary(r.cfg.Weft); err != nil {
		r.skip(sizeName, "—", fmt.Sprintf("cannot read %s as an ELF binary: %v", r.cfg.Weft, err))
	} else {
		res := binarySizeResult(sizeName, bs)
		res.Target, res.Verdict = fmt.Sprintf("loaded ≤ %s", fmtMB(maxLoaded)), verdict(bs.Loaded <= maxLoaded)
		r.add(res)
	}

	dir, err := r.tempDir("startup")
	if err != nil {
		return err
	}
	env, err := r.weftEnv(dir)
	if err != nil {
		return err
	}
	work := filepath.Join(dir, "work")
	version := func(env []string) (wall, cpu time.Duration, rss int64, stderr string, err error) {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c := command(ctx, env, work, r.cfg.Weft, "version")
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		wall, cpu, rss, err = runMeasured(c)
		if err != nil {
			return 0, 0, 0, "", fmt.Errorf("weft version: %w; stderr ends: %s", err, lastLines(errb.String(), 5))
		}
		if !strings.HasPrefix(out.String(), "weft ") {
			return 0, 0, 0, "", fmt.Errorf("weft version printed %q", lastLines(out.String(), 3))
		}
		return wall, cpu, rss, errb.String(), nil
	}

	if _, _, _, _, err := version(env); err != nil { // the page cache, and the config dir
		return err
	}
	var wall, cpu samples
	var rss []int64
	for range r.sz.startupRuns {
		w, c, m, _, err := version(env)
		if err != nil {
			return err
		}
		wall, cpu, rss = append(wall, w), append(cpu, c), append(rss, m)
	}
	r.add(Result{
		Name:    execName,
		Result:  fmt.Sprintf("p50 %s (CPU %s, peak RSS %s)", fmtDur(wall.median()), fmtDur(cpu.median()), fmtMB(float64(median64(rss)))),
		Target:  "≤ 5 ms",
		Verdict: verdict(wall.median() <= maxVersionWall),
		Note: fmt.Sprintf("%d runs, %s–%s; the process start, package initialisation and flag parsing (`weft version --sandbox` adds the sandbox's probes); peak RSS counts the pages of the binary's file, which follow how the file sits in the page cache (compare two binaries as copies made the same way, e.g. by cp)",
			len(wall), fmtDur(wall.quantile(0)), fmtDur(wall.quantile(1))),
		Values: map[string]float64{"wall_p50_ms": ms(wall.median()), "wall_min_ms": ms(wall.quantile(0)), "cpu_ms": ms(cpu.median()), "peak_rss_bytes": float64(median64(rss))},
	})
	r.addPlot("startup", "`weft version`: exec to exit", series{"weft version", wall})

	traced := append(env[:len(env):len(env)], "GODEBUG=inittrace=1")
	var runs [][]initEntry
	var lastInit samples
	for range r.sz.inittraceRuns {
		_, _, _, stderr, err := version(traced)
		if err != nil {
			return err
		}
		es, err := parseInittrace(stderr)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return fmt.Errorf("GODEBUG=inittrace=1 weft version: no init lines on stderr: %q", lastLines(stderr, 3))
		}
		runs = append(runs, es)
		end := time.Duration(0)
		for _, e := range es {
			end = max(end, e.at+e.clock)
		}
		lastInit = append(lastInit, end)
	}
	byMod := initByModule(runs, mods)
	var clock time.Duration
	var allocated int64
	packages := 0
	vals := map[string]float64{}
	for _, m := range byMod {
		clock += m.clock
		allocated += m.bytes
		packages += m.packages
		vals["module_init_ms:"+m.module] = ms(m.clock)
	}
	vals["init_clock_ms"], vals["init_bytes"], vals["inits_done_ms"] = ms(clock), float64(allocated), ms(lastInit.median())
	var top []string
	for _, m := range byMod[:min(len(byMod), 10)] {
		pl := "packages"
		if m.packages == 1 {
			pl = "package"
		}
		top = append(top, fmt.Sprintf("%s %s (%d %s, %s)", m.module, fmtDur(m.clock), m.packages, pl, fmtMB(float64(m.bytes))))
	}
	note := fmt.Sprintf("GODEBUG=inittrace=1 over %d runs of `weft version`, means; the last init ends %s after the runtime starts (median); by module: %s",
		len(runs), fmtDur(lastInit.median()), strings.Join(top, ", "))
	if modErr != nil {
		note += fmt.Sprintf("; no build information (%v): grouped by package", modErr)
	}
	r.add(Result{
		Name:    initName,
		Result:  fmt.Sprintf("%s in %d packages, %s allocated", fmtDur(clock), packages, fmtMB(float64(allocated))),
		Target:  "≤ 2 ms",
		Verdict: verdict(clock <= maxInitClock),
		Note:    note,
		Values:  vals,
	})
	return nil
}

// binarySizeResult is the row of a binary's size.
func binarySizeResult(name string, bs *binarySize) Result {
	vals := map[string]float64{
		"file_bytes": float64(bs.File), "loaded_bytes": float64(bs.Loaded), "code_bytes": float64(bs.Text),
		"functables_bytes": float64(bs.FuncTables), "rodata_bytes": float64(bs.ReadOnly), "data_bytes": float64(bs.Data),
		"dwarf_bytes": float64(bs.Debug),
	}
	note := fmt.Sprintf("%s code, %s function tables (pclntab, go:func.*), %s read-only data, %s data; %s DWARF (not loaded; -ldflags=-w leaves it out)",
		fmtMB(float64(bs.Text)), fmtMB(float64(bs.FuncTables)), fmtMB(float64(bs.ReadOnly)), fmtMB(float64(bs.Data)), fmtMB(float64(bs.Debug)))
	if !bs.Symbols {
		note += "; no symbol table (built with -s): no sizes by module"
	} else {
		var top []string
		var shared, rest int64
		for i, m := range bs.Modules {
			vals["module_bytes:"+m.Module] = float64(m.Share)
			shared += m.Share
			if i < 12 {
				top = append(top, fmt.Sprintf("%s %s", m.Module, fmtMB(float64(m.Share))))
			} else {
				rest += m.Share
			}
		}
		if n := len(bs.Modules) - len(top); n > 0 {
			top = append(top, fmt.Sprintf("%d more %s", n, fmtMB(float64(rest))))
		}
		if other := bs.Loaded - shared; other > 0 {
			top = append(top, fmt.Sprintf("type descriptors, strings and other data of no sized symbol %s", fmtMB(float64(other))))
			vals["unattributed_bytes"] = float64(other)
		}
		note += "; loaded bytes by module (its code and data symbols plus the function tables' share, in proportion to its code): " + strings.Join(top, ", ")
	}
	return Result{
		Name:    name,
		Result:  fmt.Sprintf("%s file, %s loaded", fmtMB(float64(bs.File)), fmtMB(float64(bs.Loaded))),
		Target:  "—",
		Verdict: Info,
		Note:    note,
		Values:  vals,
	}
}
