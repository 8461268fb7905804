package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

type chatCmd struct {
	Session  string   `short:"s" help:"Continue this session." placeholder:"ID"`
	Continue bool     `short:"c" name:"continue" help:"Continue the latest session."`
	Model    string   `short:"m" help:"Model as PROVIDER:MODEL or a name from the config file." env:"WEFT_MODEL" placeholder:"PROVIDER:MODEL"`
	Mount    []string `help:"Mount a directory in a new session: PATH, PATH:ro, ID=PATH[:ro]. Repeatable. The working directory is mounted read-write as 'work'." placeholder:"PATH[:ro]"`
	MaxSteps int      `help:"Most model calls in a run; 0 or absent: the config file's maxSteps, else 50." placeholder:"N"`
	Local    bool     `help:"Run in this process even when a host is reachable."`
	Network  string   `help:"A new session's shell network policy: allow or deny (default: the config's, deny)." enum:",allow,deny" default:""`
	Approve  string   `help:"Approval mode: read-only, ask-writes (default), ask-all or never-ask." enum:",read-only,ask-writes,ask-all,never-ask" default:"" placeholder:"MODE"`
}

// chat is an interactive session at a terminal.
type chat struct {
	a    *app
	cmd  *chatCmd
	conn *conn
	ap   *approval
	con  *console
	ed   lineEditor

	sessionID string
	model     string
	// mounts are the mounts of the session the next prompt creates.
	mounts []string
	// title, if set, is the title of the session the next prompt creates.
	title string
}

// errQuit ends the interactive session.
var errQuit = errors.New("quit")

func (c *chatCmd) Run(ctx context.Context, a *app) error {
	in, ok := a.stdin.(*os.File)
	if !ok || !isTerminal(in) || !isTerminal(a.stdout) {
		return usageErr("weft chat needs a terminal: in scripts use weft run -p PROMPT")
	}
	switch {
	case c.MaxSteps < 0:
		return usageErr("--max-steps %d: want a positive number, or 0 for the default", c.MaxSteps)
	case c.Continue && c.Session != "":
		return usageErr("-c continues the latest session; -s names one: give one of them")
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	const name = "weft"
	ap := newApproval(c.Approve, true, cfg.Policy)
	mode := anyHost
	if c.Local {
		mode = localOnly
	}
	conn, err := a.connect(ctx, name, mode, ap.hostPolicy(), func(down bool) {
		if down {
			fmt.Fprintf(a.stderr, "\r\nweft: the host at %s is gone; reconnecting…\r\n", a.hostAddr())
		} else {
			fmt.Fprint(a.stderr, "\r\nweft: reconnected\r\n")
		}
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	if !conn.remote {
		ctx = clientCtx(ctx, name)
	}
	ch := &chat{a: a, cmd: c, conn: conn, ap: ap, sessionID: c.Session, model: c.Model, mounts: c.Mount}
	if c.Continue {
		if ch.sessionID, err = latestSession(ctx, conn.h); err != nil {
			return err
		}
	}
	if conn.remote {
		ch.model = absModel(ch.model)
	} else if err := a.checkModel(ctx, conn.h, ch.model, ch.sessionID); err != nil {
		return a.hostModelError(conn, err)
	}
	if _, err := parseMounts(ch.mounts); err != nil {
		return usageErr("%v", err)
	}
	ch.con, err = openConsole(in)
	if err != nil {
		return err
	}
	defer ch.con.Restore()
	ch.ed.out = a.stderr
	return ch.loop(ctx)
}

// loop reads prompts and commands until Ctrl-D, /quit or two Ctrl-C.
func (ch *chat) loop(ctx context.Context) error {
	where := "a host in this process"
	if ch.conn.remote {
		where = "the host at " + ch.a.hostAddr()
		if s := ch.a.server.Load(); s != nil && s.Cwd != "" {
			where += fmt.Sprintf(" (%s %s in %s)", s.Name, s.Version, s.Cwd)
		}
	}
	ch.say("weft %s · through %s · /help lists the commands, Ctrl-D exits", version, where)
	if ch.sessionID != "" {
		if err := ch.switchTo(ctx, ch.sessionID); err != nil {
			return err
		}
	}
	interrupted := false
	for {
		line, err := ch.readLine(ctx, "› ")
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, errInterrupted):
			if interrupted {
				return nil
			}
			interrupted = true
			ch.say("(Ctrl-C again, or Ctrl-D, exits)")
			continue
		case err != nil:
			return err
		}
		interrupted = false
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "/"):
			if err := ch.command(ctx, line); errors.Is(err, errQuit) {
				return nil
			} else if err != nil {
				ch.say("weft: %v", err)
			}
		default:
			ch.ed.remember(line)
			if err := ch.send(ctx, line); err != nil {
				ch.say("weft: %v", ch.a.hostModelError(ch.conn, withFlags("run", err)))
			}
		}
	}
}

// errInterrupted is Ctrl-C at the prompt.
var errInterrupted = errors.New("interrupted")

// say prints a line (raw mode: the newline returns the carriage too).
func (ch *chat) say(format string, args ...any) {
	fmt.Fprintf(ch.a.stderr, format+"\n", args...)
}

// readLine reads a line at prompt: io.EOF for Ctrl-D on an empty line,
// errInterrupted for Ctrl-C.
func (ch *chat) readLine(ctx context.Context, prompt string) (string, error) {
	ch.ed.start(prompt)
	for {
		for len(ch.con.queued) > 0 {
			k := ch.con.queued[0]
			ch.con.queued = ch.con.queued[1:]
			switch k.code {
			case keyEOF:
				if len(ch.ed.buf) == 0 {
					ch.ed.abandon("")
					return "", io.EOF
				}
			case keyInterrupt:
				ch.ed.abandon("^C")
				return "", errInterrupted
			default:
				if line, done := ch.ed.key(k); done {
					return line, nil
				}
			}
		}
		select {
		case b, ok := <-ch.con.keys:
			if !ok {
				ch.ed.abandon("")
				return "", io.EOF
			}
			ch.con.queued = append(ch.con.queued, ch.con.dec.decode(b)...)
		case <-ch.a.interrupts:
			ch.ed.abandon("^C")
			return "", errInterrupted
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

const chatHelp = `  a line that does not start with / is a prompt: the agent answers it in this session
  /new            start a new session with the next prompt
  /sessions       list the latest sessions
  /switch ID      continue session ID
  /mount PATH[:ro]  mount a directory (in a new session: from its first prompt)
  /rename TITLE   give the session a new title
  /history        the prompts of this session
  /help           this list
  /quit           exit (also Ctrl-D; Ctrl-C twice at the prompt)
  While a run goes: Ctrl-C cancels it; approvals and questions are asked here.
  Up and down recall earlier prompts.`

// command runs a /command.
func (ch *chat) command(ctx context.Context, line string) error {
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	h := ch.conn.h
	switch cmd {
	case "/help", "/?":
		ch.say("%s", chatHelp)
	case "/quit", "/exit", "/q":
		return errQuit
	case "/new":
		ch.sessionID, ch.mounts, ch.title = "", ch.cmd.Mount, ""
		ch.say("a new session starts with your next prompt")
	case "/sessions":
		res, err := h.ListSessions(ctx, api.ListSessionsParams{Limit: 20})
		if err != nil {
			return err
		}
		if len(res.Sessions) == 0 {
			ch.say("no sessions yet")
		}
		for _, s := range res.Sessions {
			mark := " "
			if s.ID == ch.sessionID {
				mark = "*"
			}
			ch.say("%s %s  %s  %s", mark, s.ID, s.UpdatedAt.Local().Format("2006-01-02 15:04"), clip(s.Title, 60))
		}
	case "/switch":
		if arg == "" {
			return errors.New("/switch ID: name a session (see /sessions)")
		}
		return ch.switchTo(ctx, arg)
	case "/mount":
		return ch.mount(ctx, arg)
	case "/rename":
		return ch.rename(ctx, arg)
	case "/history":
		if ch.sessionID == "" {
			ch.say("no session yet: the first prompt starts one")
			return nil
		}
		prompts, err := ch.prompts(ctx)
		if err != nil {
			return err
		}
		for i, p := range prompts {
			ch.say("%3d  %s", i+1, clip(p, 200))
		}
	default:
		return fmt.Errorf("unknown command %s (/help lists them)", cmd)
	}
	return nil
}

// switchTo makes session id the current one, with its prompts as the
// history.
func (ch *chat) switchTo(ctx context.Context, id string) error {
	s, err := ch.conn.h.GetSession(ctx, api.SessionGetParams{SessionID: id})
	if err != nil {
		return err
	}
	ch.sessionID = s.ID
	prompts, err := ch.prompts(ctx)
	if err != nil {
		return err
	}
	ch.ed.history = prompts
	ch.say("session %s: %s (%d prompts; /history lists them)", s.ID, clip(s.Title, 60), len(prompts))
	return nil
}

// prompts are the user's inputs in the current session's log.
func (ch *chat) prompts(ctx context.Context) ([]string, error) {
	var out []string
	var after int64
	for {
		page, err := ch.conn.h.ReadEvents(ctx, api.ReadEventsParams{SessionID: ch.sessionID, After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, e := range page.Events {
			if e.Type == event.MessageUser {
				var d event.MessageUserData
				if e.Decode(&d) == nil {
					out = append(out, event.Text(d.Content))
				}
			}
			after = e.Seq
		}
		if !page.HasMore || len(page.Events) == 0 {
			return out, nil
		}
	}
}

// mount mounts a directory: in the current session through the host, or
// in the session the next prompt creates.
func (ch *chat) mount(ctx context.Context, spec string) error {
	if spec == "" {
		return errors.New("/mount PATH[:ro]: name a directory")
	}
	if ch.sessionID == "" {
		if _, err := parseMounts(append(ch.mounts, spec)); err != nil {
			return err
		}
		ch.mounts = append(ch.mounts, spec)
		ch.say("%s will be mounted in the session your next prompt starts", spec)
		return nil
	}
	mounts, err := parseMounts([]string{spec})
	if err != nil {
		return err
	}
	m := mounts[len(mounts)-1] // after the working directory
	r, err := ch.conn.h.Mount(ctx, api.MountParams{SessionID: ch.sessionID, Mount: m})
	if err != nil {
		return withFlags("mount", err)
	}
	ch.say("mounted %s at %s (%s)", filepath.Base(m.Path), env.Prefix+"/"+r.MountID, r.Mount.Mode)
	return nil
}

// rename gives the current session a new title, or the session the
// next prompt creates its title.
func (ch *chat) rename(ctx context.Context, title string) error {
	if title == "" {
		return errors.New("/rename TITLE: give the new title")
	}
	if ch.sessionID == "" {
		ch.title = title
		ch.say("the session your next prompt starts will be called %q", title)
		return nil
	}
	s, err := ch.conn.h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: ch.sessionID, Title: &title})
	if err != nil {
		return sessionErr(ch.sessionID, err)
	}
	ch.say("session %s: %s", s.ID, s.Title)
	return nil
}

// send runs prompt in the current session (a new one if none) and
// watches the run until it ends.
func (ch *chat) send(ctx context.Context, prompt string) error {
	h := ch.conn.h
	var cursor int64
	started := false
	if ch.sessionID == "" {
		mounts, err := parseMounts(ch.mounts)
		if err != nil {
			return err
		}
		title := ch.title
		if title == "" {
			title = clip(prompt, 60)
		}
		s, err := h.CreateSession(ctx, api.CreateSessionParams{Title: title, Model: ch.model, Mounts: mounts, Network: ch.cmd.Network})
		if err != nil {
			return err
		}
		mounts0, title0 := ch.mounts, ch.title
		ch.sessionID, ch.mounts, ch.title = s.ID, ch.cmd.Mount, ""
		defer func() {
			if ch.sessionID == s.ID && !started {
				// The run was refused: the new session holds nothing.
				discardSession(ctx, h, s.ID)
				ch.sessionID, ch.mounts, ch.title = "", mounts0, title0
			}
		}()
	} else {
		s, err := h.GetSession(ctx, api.SessionGetParams{SessionID: ch.sessionID})
		if err != nil {
			return err
		}
		cursor = s.LastSeq
	}
	r, err := h.StartRun(ctx, api.StartRunParams{SessionID: ch.sessionID, Input: api.Input(event.TextParts(prompt)),
		Model: ch.model, MaxSteps: ch.cmd.MaxSteps, DefaultPreset: ch.ap.defaultPreset()})
	started = err == nil
	if err != nil {
		return err
	}
	w := &watcher{a: ch.a, c: ch.conn, con: ch.con, requests: askInline, interrupt: cancelRun,
		sessionID: ch.sessionID, runID: r.ID,
		pr: &printer{stdout: ch.a.stdout, stderr: ch.a.stderr, tty: isTerminal(ch.a.stderr)}}
	start := time.Now()
	sid := ch.sessionID
	e, err := w.watch(ctx, func(ctx context.Context) iter.Seq2[event.Event, error] { return ch.conn.follow(ctx, sid, cursor) })
	if err != nil {
		return err
	}
	var d event.RunEndedData
	_ = e.Decode(&d)
	ch.say("\033[2m· %s · %d step(s) · %s tokens · %s\033[0m", strings.TrimPrefix(string(e.Type), "run."), d.Steps,
		compactCount(d.Usage.InputTokens+d.Usage.OutputTokens), time.Since(start).Truncate(100*time.Millisecond))
	return nil
}
