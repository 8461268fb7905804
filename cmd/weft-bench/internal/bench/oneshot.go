package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// oneShot is one side of the one-shot comparison: how to run it once.
type oneShot struct {
	env  []string
	dir  string
	name string
	args []string
	// wall, cpu and peak RSS of each timed run.
	wall, cpu samples
	rss       []int64
}

// run runs the command once, checks that it printed the mock's answer,
// and returns its wall time (start to exit), CPU time and peak RSS (of
// its process tree, sampled: see runMeasured).
func (o *oneShot) run(ctx context.Context) (wall, cpu time.Duration, rss int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c := command(ctx, o.env, o.dir, o.name, o.args...)
	var out bytes.Buffer
	errb := &tailBuffer{max: 8 << 10}
	c.Stdout, c.Stderr = &out, errb
	wall, cpu, rss, err = runMeasured(c)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %s", fmtDur(wall))
		}
		return 0, 0, 0, fmt.Errorf("%s %s: %w; stderr ends: %s", filepath.Base(o.name), strings.Join(o.args[:1], " "), err, lastLines(errb.String(), 5))
	}
	if want := strings.Join(mockWords[:], ""); !strings.Contains(out.String(), want) {
		return 0, 0, 0, fmt.Errorf("%s printed no answer (%q): %q", filepath.Base(o.name), want, lastLines(out.String(), 5))
	}
	return wall, cpu, rss, nil
}

func (o *oneShot) record(ctx context.Context) error {
	w, c, m, err := o.run(ctx)
	if err != nil {
		return err
	}
	o.wall, o.cpu, o.rss = append(o.wall, w), append(o.cpu, c), append(o.rss, m)
	return nil
}

// runOneShot measures a one-shot `weft run` — a new process with a store
// on a temporary file (warmed by a first run), the mock model — and, when
// installed, `codex exec` with the same prompt against the same mock:
// pairs of runs, the side that goes first alternating, after one
// untimed run of each.
func runOneShot(ctx context.Context, r *runner) error {
	const name, target = "one-shot run, wall time", "≤ 1/20 of codex exec"
	if why := r.needWeft(); why != "" {
		r.skip(name, target, why)
		return nil
	}
	dir, err := r.tempDir("oneshot")
	if err != nil {
		return err
	}
	wdir := filepath.Join(dir, "weft")
	env, err := r.weftEnv(wdir)
	if err != nil {
		return err
	}
	weft := &oneShot{env: env, dir: filepath.Join(wdir, "work"), name: r.cfg.Weft,
		args: []string{"run", "--local", "-m", weftModel, "-p", prompt}}
	var codex *oneShot
	var codexErr error
	if r.cfg.Codex != "" {
		cdir := filepath.Join(dir, "codex")
		cenv, err := r.codexEnv(cdir)
		if err != nil {
			return err
		}
		codex = &oneShot{env: cenv, dir: filepath.Join(cdir, "work"), name: r.cfg.Codex,
			args: []string{"exec", "--skip-git-repo-check", prompt}}
	}
	if _, _, _, err := weft.run(ctx); err != nil { // makes and migrates the store
		return err
	}
	if codex != nil {
		if _, _, _, err := codex.run(ctx); err != nil {
			codexErr = err
		}
	}
	for i := range r.sz.oneshotPairs {
		sides := []*oneShot{weft, codex}
		if i%2 == 1 {
			sides[0], sides[1] = codex, weft
		}
		for _, s := range sides {
			if s == nil || s == codex && codexErr != nil {
				continue
			}
			if err := s.record(ctx); err != nil {
				if s == weft {
					return err
				}
				codexErr = err
			}
		}
	}
	w := weft.wall.median()
	res := Result{Name: name, Target: target, Values: map[string]float64{
		"weft_wall_ms": ms(w), "weft_cpu_ms": ms(weft.cpu.median()), "weft_peak_rss_bytes": float64(median64(weft.rss)),
	}}
	detail := fmt.Sprintf("weft: wall %s–%s, CPU %s, peak RSS %s; `weft run --local` with --store on a temporary file, %d runs; peak RSS of the process tree, sampled from /proc every 2 ms",
		fmtDur(weft.wall.quantile(0)), fmtDur(weft.wall.quantile(1)), fmtDur(weft.cpu.median()), fmtMB(float64(median64(weft.rss))), len(weft.wall))
	switch {
	case codex == nil:
		res.Result, res.Verdict, res.Note = "weft "+fmtDur(w), Skipped, codexMissing+"; "+detail
	case codexErr != nil:
		res.Result, res.Verdict, res.Note = "weft "+fmtDur(w), Skipped, "codex exec failed: "+codexErr.Error()+"; "+detail
	default:
		c := codex.wall.median()
		res.Result = fmt.Sprintf("weft %s · codex %s (%s)", fmtDur(w), fmtDur(c), ratio(ms(w), ms(c)))
		res.Verdict = verdict(w*20 <= c)
		res.Note = detail + fmt.Sprintf("; codex exec: wall %s–%s, CPU %s, peak RSS %s, %d runs, alternating with weft's", fmtDur(codex.wall.quantile(0)),
			fmtDur(codex.wall.quantile(1)), fmtDur(codex.cpu.median()), fmtMB(float64(median64(codex.rss))), len(codex.wall))
		res.Values["codex_wall_ms"], res.Values["codex_cpu_ms"] = ms(c), ms(codex.cpu.median())
		res.Values["codex_peak_rss_bytes"] = float64(median64(codex.rss))
	}
	r.add(res)
	var cs dist
	if codex != nil {
		cs = codex.wall
	}
	r.addPlot("oneshot", "One-shot run: process start to exit", series{"weft run", weft.wall}, series{"codex exec", cs})
	return nil
}

func median64(v []int64) int64 {
	s := make(samples, len(v))
	for i, x := range v {
		s[i] = time.Duration(x)
	}
	return int64(s.median())
}
