package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
)

type runCmd struct {
	Prompt   string   `short:"p" help:"The prompt; read from stdin when absent." placeholder:"TEXT"`
	Session  string   `short:"s" help:"Continue this session with its whole transcript." placeholder:"ID"`
	Continue bool     `short:"c" name:"continue" help:"Continue the latest session."`
	Model    string   `short:"m" help:"Model as PROVIDER:MODEL or a name from the config file." env:"WEFT_MODEL" placeholder:"PROVIDER:MODEL"`
	Mount    []string `help:"Mount a directory: PATH, PATH:ro, ID=PATH[:ro]. Repeatable. The working directory is mounted read-write as 'work'." placeholder:"PATH[:ro]"`
	MaxSteps int      `help:"Most model calls in the run; 0 or absent: the config file's maxSteps, else 50." placeholder:"N"`
	JSON     bool     `name:"json" help:"Print every event as one JSON line, exactly as stored."`
	Detach   bool     `help:"Start the run on the host and print the session and run IDs."`
	Local    bool     `help:"Run in this process even when a host is reachable."`
	Busy     string   `help:"Through a host, what to do when the session has an active run: reject, queue, interrupt, steer." enum:"reject,queue,interrupt,steer" default:"reject"`
	Network  string   `help:"A new session's shell network policy: allow or deny (default: the config's, deny)." enum:",allow,deny" default:""`
	Approve  string   `help:"Approval mode: read-only, ask-writes, ask-all or never-ask (default: ask-writes on a terminal, never-ask for scripts and --json)." enum:",read-only,ask-writes,ask-all,never-ask" default:"" placeholder:"MODE"`
	Wait     bool     `name:"wait-for-answers" help:"When no one is at a terminal, let approvals and questions wait for weft approve|deny|answer (through weft serve) instead of cancelling the run."`
	Image    []string `help:"Attach an image file (PNG, JPEG, GIF or WebP) to the prompt. Repeatable." placeholder:"FILE"`
	Resource []string `help:"Attach a resource of an MCP server to the prompt, read when the run starts. Repeatable." placeholder:"SERVER:URI"`
	budgetFlags
}

// budgetFlags are a run's budget, over the config file's budgets.run.
type budgetFlags struct {
	BudgetUSD    float64       `name:"budget-usd" help:"Most the run may cost, in US dollars at the model's price (0: the config's budgets.run, else none)." placeholder:"USD"`
	BudgetTokens int64         `name:"budget-tokens" help:"Most input plus output tokens the run may use." placeholder:"N"`
	BudgetSteps  int           `name:"budget-steps" help:"Most model calls the run may make before its budget stops or asks (unlike --max-steps, a budget can ask)." placeholder:"N"`
	BudgetTime   time.Duration `name:"budget-time" help:"Most wall time the run may take, e.g. 30m." placeholder:"DURATION"`
	OnBudget     string        `name:"on-budget" help:"On reaching a budget: stop the run (default), or ask whether to raise it (weft answer, the TUI, any client)." enum:",stop,ask" default:""`
}

// budget returns the flags' budget, nil when they set none.
func (f budgetFlags) budget() (*event.Budget, error) {
	b := event.Budget{CostUSD: f.BudgetUSD, Tokens: f.BudgetTokens, Steps: f.BudgetSteps,
		WallTimeMs: f.BudgetTime.Milliseconds(), OnBudget: f.OnBudget}
	if f.BudgetTime > 0 && b.WallTimeMs == 0 {
		b.WallTimeMs = 1
	}
	if err := b.Check("budget"); err != nil {
		msg := err.Error()
		for _, f := range [][2]string{{"budget.costUsd", "--budget-usd"}, {"budget.tokens", "--budget-tokens"},
			{"budget.steps", "--budget-steps"}, {"budget.wallTimeMs", "--budget-time"}, {"budget.onBudget", "--on-budget"}} {
			if rest, ok := strings.CutPrefix(msg, f[0]+" "); ok {
				msg = f[1] + " " + rest
			}
		}
		return nil, usageErr("%s", msg)
	}
	if b.IsZero() {
		return nil, nil
	}
	return &b, nil
}

// interactive reports whether a person answers at the terminal: stdin
// and stderr are terminals and events are not printed as JSON.
func (c *runCmd) interactive(a *app) bool {
	return !c.JSON && isTerminal(a.stdin) && isTerminal(a.stderr)
}

func (c *runCmd) Run(ctx context.Context, a *app) error {
	switch {
	case c.MaxSteps < 0:
		return usageErr("--max-steps %d: want a positive number, or 0 for the default", c.MaxSteps)
	case c.Continue && c.Session != "":
		return usageErr("-c continues the latest session; -s names one: give one of them")
	case c.Wait && c.Local:
		return usageErr("--wait-for-answers needs `weft serve`: a run in this process cannot be answered from elsewhere")
	}
	if _, err := c.budget(); err != nil {
		return err
	}
	prompt := c.Prompt
	if prompt == "" {
		if !isTerminal(a.stdin) {
			b, err := io.ReadAll(io.LimitReader(a.stdin, 16<<20))
			if err != nil {
				return fmt.Errorf("read prompt from stdin: %w", err)
			}
			prompt = string(b)
		}
	}
	images, err := readImages(c.Image)
	if err != nil {
		return err
	}
	for _, r := range c.Resource {
		if server, uri, ok := strings.Cut(r, ":"); !ok || server == "" || uri == "" {
			return usageErr("--resource %q: want SERVER:URI (weft mcp resources lists them)", r)
		}
	}
	if strings.TrimSpace(prompt) == "" && len(images) == 0 && len(c.Resource) == 0 {
		return usageErr("empty prompt: pass -p PROMPT or write the prompt on stdin")
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	interactive := c.interactive(a)
	ap := newApproval(c.Approve, interactive, cfg.Policy)
	mode := anyHost
	switch {
	case c.Local:
		mode = localOnly
	case c.Detach || c.Wait:
		mode = remoteOnly
	}
	name := "weft run"
	conn, err := a.connect(ctx, name, mode, ap.hostPolicy(), nil)
	if err != nil {
		if errors.Is(err, errNoHost) && c.Detach {
			return a.noHostError("--detach needs `weft serve`: start it, or run without --detach", nil)
		}
		if errors.Is(err, errNoHost) && c.Wait {
			return a.noHostError("--wait-for-answers needs `weft serve`: start it, or run on a terminal", nil)
		}
		return err
	}
	defer conn.Close()
	if !conn.remote {
		ctx = clientCtx(ctx, name)
	}
	if c.Continue {
		if c.Session, err = latestSession(ctx, conn.h); err != nil {
			return err
		}
	}
	model := c.Model
	if conn.remote {
		model = absModel(model)
		if err := hostCheckModel(ctx, conn.h, model, c.Session); err != nil {
			return a.hostModelError(conn, err)
		}
	} else if err := a.checkModel(ctx, conn.h, model, c.Session); err != nil {
		// Say what is wrong with the model before anything is written.
		return a.hostModelError(conn, err)
	}
	err = c.runOn(ctx, a, conn, ap, model, prompt, images)
	return a.hostModelError(conn, withFlags("run", err))
}

// resourceParts reads the resource uri of the MCP server through the
// host (mcp/read_resource, the session's servers included) and returns
// it as input parts: each text content as a text part that names its
// URI, each image as an image part, any other binary content as a line
// naming its type and size.
func resourceParts(ctx context.Context, h api.Host, sessionID, server, uri string) ([]event.Part, error) {
	res, err := h.MCPReadResource(ctx, api.MCPReadResourceParams{SessionID: sessionID, Server: server, URI: uri})
	if err != nil {
		return nil, err
	}
	var parts []event.Part
	for _, c := range res.Contents {
		switch {
		case c.Blob == nil:
			parts = append(parts, event.TextParts(fmt.Sprintf("\n[resource %s]\n%s", c.URI, c.Text))...)
		case slices.Contains(event.ImageMediaTypes(), c.MIMEType) && event.CheckImage(event.Part{Type: event.PartImage, MediaType: c.MIMEType, Data: c.Blob}) == nil:
			parts = append(parts, event.TextParts(fmt.Sprintf("\n[resource %s: an image]", c.URI))...)
			parts = append(parts, event.Part{Type: event.PartImage, MediaType: c.MIMEType, Data: c.Blob})
		default:
			parts = append(parts, event.TextParts(fmt.Sprintf("\n[resource %s: %s, %d bytes of binary data, not shown]", c.URI, orType(c.MIMEType), len(c.Blob)))...)
		}
	}
	return parts, nil
}

// readImages reads the image files of --image, each as an image part
// whose media type is sniffed from its bytes, and checks them as the host
// will (type, size, that they decode), so that a bad file is refused
// before anything is written, naming it.
func readImages(paths []string) ([]event.Part, error) {
	var parts []event.Part
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageErr("--image: %v", err)
		}
		data, err := io.ReadAll(io.LimitReader(f, event.MaxImageBytes+1))
		f.Close()
		if err != nil {
			return nil, usageErr("--image %s: %v", path, err)
		}
		if len(data) > event.MaxImageBytes {
			return nil, usageErr("--image %s: the file is larger than %d bytes, the limit of one image", path, event.MaxImageBytes)
		}
		mediaType := http.DetectContentType(data)
		if !slices.Contains(event.ImageMediaTypes(), mediaType) {
			return nil, usageErr("--image %s: the file is %s, not one of %s", path, mediaType, strings.Join(event.ImageMediaTypes(), ", "))
		}
		p, err := event.ImagePart(mediaType, data)
		if err != nil {
			return nil, usageErr("--image %s: %v", path, err)
		}
		parts = append(parts, p)
	}
	if _, err := event.CheckImages(parts); err != nil {
		return nil, usageErr("--image: %v", err)
	}
	return parts, nil
}

// latestSession is the ID of the session updated last.
func latestSession(ctx context.Context, h api.Host) (string, error) {
	res, err := h.ListSessions(ctx, api.ListSessionsParams{Limit: 1})
	if err != nil {
		return "", err
	}
	if len(res.Sessions) == 0 {
		return "", errors.New("-c: there is no session to continue: run without -c to start one")
	}
	return res.Sessions[0].ID, nil
}

// runOn runs c on conn: creates or continues the session, starts the
// run, and (unless detached) prints its events until it ends, dealing
// with its requests and with Ctrl-C.
func (c *runCmd) runOn(ctx context.Context, a *app, conn *conn, ap *approval, model, prompt string, images []event.Part) error {
	h := conn.h
	sessionID := c.Session
	var cursor int64
	created := false
	if sessionID == "" {
		mounts, err := parseMounts(c.Mount)
		if err != nil {
			return usageErr("%v", err)
		}
		s, err := h.CreateSession(ctx, api.CreateSessionParams{Title: clip(prompt, 60), Model: model, Mounts: mounts, Network: c.Network})
		if err != nil {
			return err
		}
		sessionID, created = s.ID, true
	} else {
		s, err := h.GetSession(ctx, api.SessionGetParams{SessionID: sessionID})
		if err != nil {
			return err
		}
		cursor = s.LastSeq
	}
	var in api.Input
	if prompt != "" {
		in = api.Input(event.TextParts(prompt))
	}
	in = append(in, images...)
	for _, r := range c.Resource {
		server, uri, _ := strings.Cut(r, ":")
		parts, err := resourceParts(ctx, h, sessionID, server, uri)
		if err != nil {
			if created {
				discardSession(ctx, h, sessionID)
			}
			return fmt.Errorf("--resource %s: %w", r, err)
		}
		in = append(in, parts...)
	}
	budget, _ := c.budget() // checked by Run
	r, err := h.StartRun(ctx, api.StartRunParams{SessionID: sessionID, Input: in, Model: model,
		MaxSteps: c.MaxSteps, Busy: c.Busy, DefaultPreset: ap.defaultPreset(), Budget: budget})
	if err != nil {
		if created {
			// The run was refused: the new session holds nothing.
			discardSession(ctx, h, sessionID)
		}
		return err
	}
	if c.Detach {
		fmt.Fprintf(a.stdout, "%s %s\n", sessionID, r.ID)
		return nil
	}
	w := &watcher{a: a, c: conn, sessionID: sessionID, runID: r.ID, interrupt: cancelThenExit,
		pr: &printer{stdout: a.stdout, stderr: a.stderr, json: c.JSON, tty: isTerminal(a.stderr)}}
	switch {
	case c.interactive(a):
		w.tty, w.requests = a.stdin.(*os.File), askInline
	case c.Wait:
		w.requests = noteOnly
	default:
		w.requests = failFast
	}
	e, err := w.watch(ctx, func(ctx context.Context) iter.Seq2[event.Event, error] { return conn.follow(ctx, sessionID, cursor) })
	if err != nil {
		return err
	}
	var d event.RunEndedData
	if !c.JSON && e.Decode(&d) == nil {
		cost := ""
		if d.Usage.CostUSD > 0 {
			cost = " · " + usd(d.Usage.CostUSD)
		}
		fmt.Fprintf(a.stderr, "weft: session %s · run %s · %d step(s) · %d in / %d out tokens%s\n",
			sessionID, r.ID, d.Steps, d.Usage.InputTokens, d.Usage.OutputTokens, cost)
	}
	if w.failure != nil {
		return &exitError{code: exitFailed, err: w.failure}
	}
	return runExit(e.Type)
}

// runExit is the exit of a command that watched a run to its end: 0
// completed, 130 cancelled, 1 failed or interrupted.
func runExit(t event.Type) error {
	switch t {
	case event.RunCompleted:
		return nil
	case event.RunCancelled:
		return &exitError{code: exitCancelled}
	}
	return &exitError{code: exitFailed}
}

// followLocal follows a session of an in-process host from after: the
// replay, then live, subscribing again from the last event it yielded
// when the subscription ends lagged.
func followLocal(ctx context.Context, h *host.Host, sessionID string, after int64) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		for {
			seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sessionID, After: after})
			if err != nil {
				yield(event.Event{}, err)
				return
			}
			for e, err := range seq {
				if errors.Is(err, api.ErrLagged) {
					break
				}
				if !yield(e, err) || err != nil {
					return
				}
				after = e.Seq
			}
		}
	}
}

// slugRe is compiled on first use, not at start: most commands never need it.
var slugRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9_-]+`) })

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
			id = strings.Trim(slugRe().ReplaceAllString(strings.ToLower(filepath.Base(abs)), "-"), "-")
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
