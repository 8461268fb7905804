package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/lineedit"
	"weft.dev/weft/store/record"
)

// tuiOptions say what the terminal UI shows and does.
type tuiOptions struct {
	// name is the client's name in the records of who answered
	// ("weft", "weft attach").
	name string
	// chat holds the flags of new sessions and runs.
	chat *chatCmd
	// sessionID is the session to show first; "" starts a new one with
	// the first prompt.
	sessionID string
	// runID, for `weft attach RUN`, is the run whose end ends the UI.
	runID string
	// after is where the first session's replay starts (attach --after).
	after int64
	// where says which host the UI talks to, for its first line.
	where string
}

// tui is the terminal UI: a transcript of the session (prompts, streamed
// answers, reasoning, tool calls with their approvals and outputs),
// the requests that wait for an answer, the prompts sent but not yet
// seen by the model, a status line and a multi-line input. It is a
// Bubble Tea model: one goroutine (the program's) calls its methods;
// host calls run as commands, and the session's events arrive from a
// follower goroutine it owns, as messages.
type tui struct {
	a    *app
	conn *conn
	ap   *approval
	opt  tuiOptions
	th   theme
	// ctx ends the host calls and the follower when the UI ends.
	ctx    context.Context
	relay  *relay
	owned  owned      // the follower and the host calls
	dialMu sync.Mutex // serializes redials of a remote host

	width, height int

	// The session shown, and its follower.
	sessionID  string
	title      string
	model      string   // what runs ask for: -m, else the session's or host's default
	runModel   string   // the model the session's last run used, for the status line
	mounts     []string // of the session the next prompt creates
	newTitle   string   // of the session the next prompt creates
	gen        int      // generation of the follower; older events are dropped
	stopFollow context.CancelFunc
	replayTo   int64
	open       map[string]bool // requests open when the session was loaded
	creating   bool            // a session is being created for a prompt
	// fresh is the session this UI created for a prompt, until a run
	// of it starts: if the host refuses that run, the session is
	// deleted and the next prompt creates one again, as if it never was.
	fresh *freshSession

	tr       transcript
	scroll   int // lines scrolled up from the bottom; 0 follows
	expanded bool
	// shown maps the rows of the transcript on screen to their items,
	// for a click that toggles a call's output.
	shown []*item

	in      lineedit.Model
	history []string // what was typed, for ↑ and ↓
	hpos    int
	prompts []string // the session's prompts, for /history
	draft   string

	// sent are the inputs sent and not yet seen in the log.
	sent []*sentInput
	// steersSeen are steers already consumed when their receipt came.
	steersSeen map[string]bool
	runsSeen   map[string]bool

	run      *runState // the session's active run, if any
	tokens   int64     // of the session, as seen
	cost     float64   // of the session, as seen, in US dollars
	requests []*pending
	ask      *asker
	answered map[string]string // request → what was answered here

	picker *picker

	armed   bool // a Ctrl-C at an empty prompt; the next exits
	ticking bool // a tick is on its way (one at a time)
	// typedAt is when a key last went into the draft (zero once sent):
	// a request asked soon after holds its answer keys.
	typedAt  time.Time
	quitting bool
	// ended is the terminal event of opt.runID, once seen.
	ended    event.Type
	detached bool
	// rewinds are the session's rewinds seen so far, for /undo.
	rewinds []rewound
}

// freshSession is a session created for a prompt whose run has not
// started, with what the UI held for the next session before it.
type freshSession struct {
	id       string
	mounts   []string
	newTitle string
}

// runState is what the UI knows of the active run.
type runState struct {
	id         string
	started    time.Time
	step       int
	phase      string
	tokens     int64
	cost       float64 // in US dollars
	cancelling bool
}

// sentInput is a prompt sent to the host and not yet seen in the log.
type sentInput struct {
	text string
	// how: "run" (a new run), "queue" (the next run), "steer".
	how     string
	runID   string
	steerID string
}

// Messages of the UI.
type (
	eventMsg struct {
		gen int
		e   event.Event
	}
	followEndMsg struct {
		gen int
		err error
	}
	noticeMsg struct {
		text string
		warn bool
	}
	sessionMsg struct {
		s        *api.SessionResult
		open     map[string]bool
		err      error
		after    int64
		announce bool
		// note, if set, is said once the session is shown.
		note string
	}
	createdMsg struct {
		s   *api.SessionResult
		err error
	}
	startedMsg struct {
		in  *sentInput
		r   *api.RunResult
		err error
	}
	answeredMsg struct {
		p   *pending
		ans answer
		err error
	}
	sessionsMsg struct {
		list []record.Session
		err  error
	}
	infoMsg struct {
		text string
		err  error
	}
	tickMsg struct{}
)

// relay hands messages from other goroutines (the follower's reconnect
// notices, a host's log lines) to the program once it runs.
type relay struct {
	mu   sync.Mutex
	p    *tea.Program
	out  io.Writer // where lines go while no program runs
	part []byte
}

// send delivers msg to the program; it reports false when none runs.
func (r *relay) send(msg tea.Msg) bool {
	r.mu.Lock()
	p := r.p
	r.mu.Unlock()
	if p == nil {
		return false
	}
	p.Send(msg)
	return true
}

func (r *relay) attach(p *tea.Program) {
	r.mu.Lock()
	r.p = p
	r.mu.Unlock()
}

// Write turns lines (a host's log) into notices while the program runs,
// and passes them on otherwise. It must not be called from the
// program's goroutine.
func (r *relay) Write(b []byte) (int, error) {
	r.mu.Lock()
	p := r.p
	if p == nil {
		r.mu.Unlock()
		return r.out.Write(b)
	}
	r.part = append(r.part, b...)
	var lines []string
	for {
		i := strings.IndexByte(string(r.part), '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(r.part[:i]))
		r.part = r.part[i+1:]
	}
	if len(r.part) > 4096 {
		lines, r.part = append(lines, string(r.part)), nil
	}
	r.mu.Unlock()
	for _, l := range lines {
		p.Send(noticeMsg{text: "weft: " + strings.TrimPrefix(l, "weft: "), warn: true})
	}
	return len(b), nil
}

// runTUI runs the terminal UI until the person quits, and returns the
// exit: for `weft attach RUN`, the run's.
func (a *app) runTUI(ctx context.Context, c *conn, ap *approval, r *relay, opt tuiOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	t := &tui{a: a, conn: c, ap: ap, opt: opt, th: newTheme(), ctx: ctx, relay: r,
		sessionID: opt.sessionID, steersSeen: map[string]bool{}, runsSeen: map[string]bool{}, answered: map[string]string{}}
	if opt.chat != nil {
		t.model, t.mounts = opt.chat.Model, opt.chat.Mount
	}
	t.in = newInput()
	p := tea.NewProgram(t, tea.WithContext(ctx), tea.WithInput(a.stdin), tea.WithOutput(a.stdout), tea.WithoutSignalHandler())
	r.attach(p)
	_, err := p.Run()
	r.attach(nil)
	cancel()
	t.owned.close()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil && !t.quitting {
		err = nil
	}
	if err != nil {
		return err
	}
	t.farewell()
	switch {
	case t.detached:
		return nil
	case opt.runID != "" && t.ended != "":
		return runExit(t.ended)
	}
	return nil
}

// newInput is the prompt's editor: it grows with its text, wraps at the
// terminal's width, and takes Alt+Enter or Ctrl+J (Shift+Enter where the
// terminal tells it from Enter) as a newline.
func newInput() lineedit.Model {
	in := lineedit.New()
	in.MaxHeight = 8
	in.CharLimit = api.MaxInputBytes / 4
	in.Placeholder = "a prompt, or /help"
	in.Prompt = func(row int) string {
		if row == 0 {
			return "› "
		}
		return "  "
	}
	in.Focus()
	return in
}

// farewell prints, on the terminal's main screen, the end of what the
// UI showed and how to come back.
func (t *tui) farewell() {
	var lines []string
	for _, it := range t.tr.items {
		lines = append(lines, it.render(theme{}, max(t.width, 40), false)...)
	}
	if n := len(lines) - 1000; n > 0 {
		lines = lines[n:]
	}
	for _, l := range lines {
		fmt.Fprintln(t.a.stdout, l)
	}
	switch {
	case t.detached:
		fmt.Fprintln(t.a.stderr, "weft: detached; the run continues")
	case t.sessionID != "" && t.opt.chat != nil:
		fmt.Fprintf(t.a.stderr, "weft: session %s · `weft -s %s` continues it\n", t.sessionID, t.sessionID)
	}
}

// Init starts following the session given, if any.
func (t *tui) Init() tea.Cmd {
	t.notice(fmt.Sprintf("weft %s · through %s · /help lists the commands, Ctrl-D exits", version, t.opt.where), false)
	cmds := []tea.Cmd{lineedit.Blink, tea.RequestWindowSize}
	if t.sessionID != "" {
		cmds = append(cmds, t.loadSession(t.sessionID, t.opt.after, true))
	}
	return tea.Batch(cmds...)
}

// do runs fn as a command the UI owns: it ends with the UI's context
// and the UI waits for it before it returns.
//
// A command is counted when it starts, not when it is made: Bubble Tea
// drops the commands still queued when the program ends, and one never
// run must not hold the UI's end.
func (t *tui) do(fn func(ctx context.Context) tea.Msg) tea.Cmd {
	return func() tea.Msg {
		if !t.owned.add() {
			return nil // the UI has ended
		}
		defer t.owned.done()
		return fn(t.ctx)
	}
}

// owned counts the goroutines of the UI that are running, so that the
// UI returns only after they end; once closed it lets none start. Its
// methods may be called from any goroutine.
type owned struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// add counts a goroutine that starts; it reports false, counting
// nothing, once close has begun.
func (o *owned) add() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.wg.Add(1)
	return true
}

// done counts the end of a goroutine that add counted.
func (o *owned) done() { o.wg.Done() }

// close lets no more goroutines start and waits for those running.
func (o *owned) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wg.Wait()
}

// host is the host to call: over the wire, a connection that is still
// up (dialed again after the host restarted); in process, the host.
func (t *tui) host(ctx context.Context) (api.Host, error) {
	t.dialMu.Lock()
	defer t.dialMu.Unlock()
	c := t.conn
	if c.cl == nil {
		return c.h, nil
	}
	select {
	case <-c.cl.Done():
	default:
		return c.h, nil
	}
	cl, err := t.a.dialHost(ctx, t.opt.name)
	if err != nil {
		return nil, err
	}
	old := c.cl
	c.cl, c.h = cl, cl
	old.Close()
	return cl, nil
}

// call runs fn on the host as an owned command.
func (t *tui) call(fn func(ctx context.Context, h api.Host) tea.Msg, fail func(error) tea.Msg) tea.Cmd {
	return t.do(func(ctx context.Context) tea.Msg {
		h, err := t.host(ctx)
		if err != nil {
			return fail(err)
		}
		return fn(ctx, h)
	})
}

// loadSession reads session id and its open requests, then follows it
// from after.
func (t *tui) loadSession(id string, after int64, announce bool) tea.Cmd {
	fail := func(err error) tea.Msg { return sessionMsg{err: sessionErr(id, err)} }
	return t.call(func(ctx context.Context, h api.Host) tea.Msg {
		s, err := h.GetSession(ctx, api.SessionGetParams{SessionID: id})
		if err != nil {
			return fail(err)
		}
		reqs, err := h.ListRequests(ctx, api.ListRequestsParams{SessionID: s.ID})
		if err != nil {
			return fail(err)
		}
		open := map[string]bool{}
		for _, q := range reqs.Requests {
			open[q.ID] = true
		}
		return sessionMsg{s: s, open: open, after: after, announce: announce}
	}, fail)
}

// follow starts following the session from after, ending the follower
// of the session shown before.
func (t *tui) follow(after int64) {
	if t.stopFollow != nil {
		t.stopFollow()
	}
	t.gen++
	gen, id := t.gen, t.sessionID
	ctx, cancel := context.WithCancel(t.ctx)
	t.stopFollow = cancel
	seq := t.conn.follow(ctx, id, after)
	if !t.owned.add() {
		return
	}
	go func() {
		defer t.owned.done()
		for e, err := range seq {
			if err != nil {
				if ctx.Err() == nil {
					t.relay.send(followEndMsg{gen: gen, err: err})
				}
				return
			}
			if !t.relay.send(eventMsg{gen: gen, e: e}) {
				return
			}
		}
	}()
}

// notice adds a line of weft's own to the transcript.
func (t *tui) notice(s string, warn bool) {
	t.tr.add(&item{kind: itemNotice, text: s, warn: warn})
}

func (t *tui) info(s string) {
	t.tr.add(&item{kind: itemInfo, text: s})
}

// Update handles a message.
func (t *tui) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		t.width, t.height = msg.Width, msg.Height
		t.in.SetWidth(msg.Width)
		t.in.MaxHeight = max(1, min(8, msg.Height/3))
		return t, nil
	case tea.KeyPressMsg:
		return t, t.key(msg)
	case tea.PasteMsg:
		switch {
		case t.ask != nil:
			return t, t.ask.paste(msg)
		case t.picker != nil:
			return t, nil
		}
		var cmd tea.Cmd
		t.in, cmd = t.in.Update(msg)
		t.typedAt = time.Now()
		return t, cmd
	case tea.MouseWheelMsg:
		switch msg.Button {
		case tea.MouseWheelUp:
			t.scrollBy(3)
		case tea.MouseWheelDown:
			t.scrollBy(-3)
		}
		return t, nil
	case tea.MouseClickMsg:
		if msg.Button == tea.MouseLeft && msg.Y >= 0 && msg.Y < len(t.shown) {
			if it := t.shown[msg.Y]; it != nil && (it.kind == itemCall || it.kind == itemReasoning) {
				it.expanded = !it.expanded
				it.changed()
			}
		}
		return t, nil
	case eventMsg:
		if msg.gen == t.gen {
			return t, t.event(msg.e)
		}
		return t, nil
	case followEndMsg:
		if msg.gen == t.gen {
			t.notice(fmt.Sprintf("weft: following session %s ended: %v", t.sessionID, msg.err), true)
		}
		return t, nil
	case noticeMsg:
		t.notice(msg.text, msg.warn)
		return t, nil
	case sessionMsg:
		return t, t.sessionLoaded(msg)
	case createdMsg:
		return t, t.created(msg)
	case startedMsg:
		return t, t.started(msg)
	case answeredMsg:
		return t, t.answeredReply(msg)
	case sessionsMsg:
		if msg.err != nil {
			t.notice("weft: "+msg.err.Error(), true)
			return t, nil
		}
		if len(msg.list) == 0 {
			t.info("no sessions yet: your first prompt starts one")
			return t, nil
		}
		t.picker = &picker{list: msg.list}
		for i, s := range msg.list {
			if s.ID == t.sessionID {
				t.picker.at = i
			}
		}
		return t, nil
	case infoMsg:
		if msg.err != nil {
			t.notice("weft: "+msg.err.Error(), true)
		} else if msg.text != "" {
			t.info(msg.text)
		}
		return t, nil
	case tickMsg:
		t.ticking = t.run != nil
		if t.ticking {
			return t, tick()
		}
		return t, nil
	}
	var cmd tea.Cmd
	t.in, cmd = t.in.Update(msg)
	return t, cmd
}

// tick wakes the UI each second while a run goes, to move the elapsed
// time on.
func tick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return tickMsg{} })
}

// scrollBy scrolls the transcript n lines up (down when negative).
func (t *tui) scrollBy(n int) {
	t.scroll = max(0, t.scroll+n)
}
