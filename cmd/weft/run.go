package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"weft.dev/weft/agent"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/config"
	"weft.dev/weft/internal/ids"
	"weft.dev/weft/internal/journal"
	"weft.dev/weft/internal/lease"
	"weft.dev/weft/internal/reconcile"
	"weft.dev/weft/store"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

type runCmd struct {
	Prompt   string   `short:"p" help:"The prompt; read from stdin when absent." placeholder:"TEXT"`
	Session  string   `short:"s" help:"Continue this session with its whole transcript." placeholder:"ID"`
	Model    string   `short:"m" help:"Model as PROVIDER:MODEL or a name from the config file." env:"WEFT_MODEL" placeholder:"PROVIDER:MODEL"`
	Mount    []string `help:"Mount a directory: PATH, PATH:ro, ID=PATH[:ro]. Repeatable. The working directory is mounted read-write as 'work'." placeholder:"PATH[:ro]"`
	MaxSteps int      `help:"Most model calls in the run (default 50 or the config file's maxSteps)." placeholder:"N"`
	JSON     bool     `name:"json" help:"Print every event as one JSON line, exactly as stored."`
	Detach   bool     `help:"Start the run on the host and print the session and run IDs."`
	Local    bool     `help:"Run in this process even when a host is reachable."`
	Busy     string   `help:"Through a host, what to do when the session has an active run: reject, queue, interrupt, steer." enum:"reject,queue,interrupt,steer" default:"reject"`
	Network  string   `help:"A new session's shell network policy: allow or deny (default: the config's, deny)." enum:",allow,deny" default:""`
}

func (c *runCmd) Run(ctx context.Context, a *app) error {
	prompt := c.Prompt
	if prompt == "" {
		if f, ok := a.stdin.(*os.File); !ok || !isTerminal(f) {
			b, err := io.ReadAll(io.LimitReader(a.stdin, 16<<20))
			if err != nil {
				return fmt.Errorf("read prompt from stdin: %w", err)
			}
			prompt = string(b)
		}
	}
	if strings.TrimSpace(prompt) == "" {
		return usageErr("empty prompt: pass -p PROMPT or write the prompt on stdin")
	}
	if !c.Local {
		cl, err := a.dialHost(ctx)
		if err == nil {
			return c.runViaHost(ctx, a, cl, prompt)
		}
		if c.Detach {
			return err
		}
	}
	cfgFile, cfgPath, err := a.loadConfig()
	if err != nil {
		return err
	}
	st, storePath, err := a.openStore(ctx, cfgFile)
	if err != nil {
		return err
	}
	defer st.Close()

	jcfg := journal.Config{Store: st}
	var (
		j         *journal.Journal
		sessionID = c.Session
		modelName = c.Model
		cursor    int64
	)
	if sessionID != "" {
		s, err := st.Session(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("session %s not found in %s (see `weft sessions`)", sessionID, storePath)
		} else if err != nil {
			return err
		}
		if modelName == "" {
			modelName = s.Model
		}
		cursor = s.LastSeq
	}
	if modelName == "" {
		modelName = cfgFile.DefaultModel
	}
	model, err := config.Resolve(modelName, cfgFile, cfgPath, a.getenv)
	if err != nil {
		return err
	}

	if sessionID == "" {
		sessionID = ids.New("ses")
	}
	ls, err := lease.Acquire(lockDir(storePath), sessionID)
	if err != nil {
		return err
	}
	defer ls.Release()

	if c.Session == "" {
		mounts, err := parseMounts(c.Mount)
		if err != nil {
			return usageErr("%v", err)
		}
		j, err = journal.Create(ctx, jcfg, sessionID, event.SessionCreatedData{Title: clip(prompt, 60), Model: model.Name, Mounts: mounts, Network: c.Network})
		if err != nil {
			return err
		}
	} else {
		if len(c.Mount) > 0 {
			return usageErr("--mount applies to new sessions; session %s keeps its mounts", sessionID)
		}
		if j, err = journal.Open(ctx, jcfg, sessionID); err != nil {
			return err
		}
	}
	defer j.Close()

	// The printer sees only committed events, from the cursor on.
	pr := &printer{stdout: a.stdout, stderr: a.stderr, json: c.JSON, tty: isTerminal(a.stderr)}
	runID := ids.New("run")
	printCtx, stopPrint := context.WithCancel(ctx)
	printed := make(chan error, 1)
	go func() {
		for e, err := range j.Events(printCtx, cursor, journal.SubscribeOptions{}) {
			if err != nil {
				printed <- err
				return
			}
			pr.print(e)
			if e.RunID == runID && event.IsTerminalRun(e.Type) {
				printed <- nil
				return
			}
		}
		printed <- nil
	}()
	defer stopPrint()

	if closed, err := reconcile.Session(ctx, st, j, sessionID); err != nil {
		return err
	} else if len(closed) > 0 && !c.JSON {
		fmt.Fprintf(a.stderr, "weft: closed %d run(s) a crash left open: %s\n", len(closed), strings.Join(closed, ", "))
	}

	sess := j.Session()
	binding, err := env.Open(sess.Binding)
	if err != nil {
		return fmt.Errorf("session %s: mounts: %w", sessionID, err)
	}
	defer binding.Close()

	history, err := agent.LoadTranscript(ctx, st, sessionID)
	if err != nil {
		return err
	}
	maxSteps := c.MaxSteps
	if maxSteps <= 0 {
		maxSteps = cfgFile.MaxSteps
	}
	input := event.TextParts(prompt)
	q, err := event.New(runID, event.RunQueued, event.RunQueuedData{Model: model.Name, MaxSteps: maxSteps, Input: input})
	if err != nil {
		return err
	}
	if _, err := j.Append(ctx, q); err != nil {
		return err
	}

	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Sandbox: cfgFile.Sandbox()}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-a.interrupts:
		case <-runCtx.Done():
			return
		}
		cancel(errors.New("interrupted by the user"))
		select {
		case <-a.interrupts:
			fmt.Fprintln(a.stderr, "\nweft: second interrupt: exiting now")
			os.Exit(exitCancelled)
		case <-runCtx.Done():
		}
	}()
	out, err := agent.Execute(runCtx, agent.Config{
		Provider: model.Provider, Model: model.Model, Tools: reg, MaxSteps: maxSteps, MaxTokens: model.MaxTokens,
	}, j, agent.Run{
		ID: runID, SessionID: sessionID, ModelName: model.Name, Input: input, History: history,
		Env: func() *env.Binding { return binding },
	})
	if err != nil {
		return err
	}
	if err := <-printed; err != nil {
		return err
	}
	if !c.JSON {
		fmt.Fprintf(a.stderr, "weft: session %s · run %s · %d step(s) · %d in / %d out tokens\n",
			sessionID, runID, out.Steps, out.Usage.InputTokens, out.Usage.OutputTokens)
	}
	switch out.Type {
	case event.RunCompleted:
		return nil
	case event.RunCancelled:
		return &exitError{code: exitCancelled}
	default:
		return &exitError{code: exitFailed}
	}
}

var slugRe = regexp.MustCompile(`[^a-z0-9_-]+`)

// parseMounts builds the mount table of a new session: the working
// directory read-write as "work" (the default, and the shells' default),
// then each --mount.
func parseMounts(specs []string) ([]event.Mount, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	mounts := []event.Mount{{ID: "work", Kind: event.KindLocal, Path: wd, Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}}
	seen := map[string]bool{"work": true}
	for _, spec := range specs {
		id, path, hasID := strings.Cut(spec, "=")
		if !hasID {
			path, id = spec, ""
		}
		mode := event.ModeReadWrite
		if p, ok := strings.CutSuffix(path, ":ro"); ok {
			path, mode = p, event.ModeReadOnly
		} else if p, ok := strings.CutSuffix(path, ":rw"); ok {
			path = p
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("--mount %s: %w", spec, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--mount %s: %s is not a directory", spec, abs)
		}
		if id == "" {
			id = strings.Trim(slugRe.ReplaceAllString(strings.ToLower(filepath.Base(abs)), "-"), "-")
			if id == "" {
				id = "mount"
			}
			for base, n := id, 2; seen[id]; n++ {
				id = fmt.Sprintf("%s-%d", base, n)
			}
		}
		if seen[id] {
			return nil, fmt.Errorf("--mount %s: mount id %q is taken", spec, id)
		}
		seen[id] = true
		mounts = append(mounts, event.Mount{ID: id, Kind: event.KindLocal, Path: abs, Mode: mode})
	}
	return mounts, nil
}
