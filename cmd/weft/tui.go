package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store"
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
	wg     sync.WaitGroup // the follower and the host calls
	dialMu sync.Mutex     // serializes redials of a remote host

	width, height int

	// The session shown, and its follower.
	sessionID  string
	title      string
	model      string
	mounts     []string // of the session the next prompt creates
	newTitle   string   // of the session the next prompt creates
	gen        int      // generation of the follower; older events are dropped
	stopFollow context.CancelFunc
	replayTo   int64
	open       map[string]bool // requests open when the session was loaded
	creating   bool            // a session is being created for a prompt

	tr       transcript
	scroll   int // lines scrolled up from the bottom; 0 follows
	expanded bool
	// shown maps the rows of the transcript on screen to their items,
	// for a click that toggles a call's output.
	shown []*item

	in      textarea.Model
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
	requests []*pending
	ask      *asker
	answered map[string]string // request → what was answered here

	picker *picker

	armed    bool // a Ctrl-C at an empty prompt; the next exits
	quitting bool
	// ended is the terminal event of opt.runID, once seen.
	ended    event.Type
	detached bool
}

// runState is what the UI knows of the active run.
type runState struct {
	id         string
	started    time.Time
	step       int
	phase      string
	tokens     int64
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
		list []store.Session
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
	t.wg.Wait()
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
func newInput() textarea.Model {
	in := textarea.New()
	in.ShowLineNumbers = false
	in.DynamicHeight = true
	in.MinHeight = 1
	in.MaxHeight = 8
	in.CharLimit = api.MaxInputBytes / 4
	in.Placeholder = "a prompt, or /help"
	in.SetPromptFunc(2, func(pi textarea.PromptInfo) string {
		if pi.LineNumber == 0 {
			return "› "
		}
		return "  "
	})
	in.KeyMap.InsertNewline.SetKeys("alt+enter", "ctrl+j", "shift+enter")
	in.KeyMap.LinePrevious.SetKeys("up")
	in.KeyMap.LineNext.SetKeys("down")
	in.KeyMap.DeleteCharacterForward.SetKeys("delete")
	st := in.Styles()
	st.Focused.CursorLine = st.Focused.Text
	st.Focused.Base = st.Focused.Base.UnsetBorderStyle()
	in.SetStyles(st)
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
	cmds := []tea.Cmd{textarea.Blink, tea.RequestWindowSize}
	if t.sessionID != "" {
		cmds = append(cmds, t.loadSession(t.sessionID, t.opt.after, true))
	}
	return tea.Batch(cmds...)
}

// do runs fn as a command the UI owns: it ends with the UI's context
// and the UI waits for it before it returns.
func (t *tui) do(fn func(ctx context.Context) tea.Msg) tea.Cmd {
	t.wg.Add(1)
	return func() tea.Msg {
		defer t.wg.Done()
		return fn(t.ctx)
	}
}

// host is the host to call: over the wire, a connection that is still
// up (dialed again after the host restarted); in process, the host.
func (t *tui) host(ctx context.Context) (hostAPI, error) {
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
func (t *tui) call(fn func(ctx context.Context, h hostAPI) tea.Msg, fail func(error) tea.Msg) tea.Cmd {
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
	return t.call(func(ctx context.Context, h hostAPI) tea.Msg {
		s, err := h.GetSession(ctx, id)
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
	t.wg.Go(func() {
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
	})
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
		if t.run != nil {
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

// key handles a key press.
func (t *tui) key(msg tea.KeyPressMsg) tea.Cmd {
	s := msg.String()
	if s != "ctrl+c" {
		t.armed = false
	}
	switch s {
	case "ctrl+c":
		return t.interrupt()
	case "ctrl+o":
		t.expanded = !t.expanded
		return nil
	case "pgup":
		t.scrollBy(max(1, t.transcriptHeight()-2))
		return nil
	case "pgdown":
		t.scrollBy(-max(1, t.transcriptHeight()-2))
		return nil
	case "ctrl+l":
		return tea.ClearScreen
	}
	if t.picker != nil {
		return t.pickerKey(msg)
	}
	if t.ask != nil {
		ans, cmd := t.ask.key(msg)
		if ans != nil {
			return t.answer(t.ask.p, *ans)
		}
		return cmd
	}
	switch s {
	case "ctrl+d":
		if t.in.Value() == "" {
			t.quitting = true
			return tea.Quit
		}
	case "enter":
		return t.submit("")
	case "tab":
		return t.submit(api.BusyQueue)
	case "up":
		if t.in.Line() == 0 && t.browse(-1) {
			return nil
		}
	case "down":
		if t.in.Line() == t.in.LineCount()-1 && t.browse(1) {
			return nil
		}
	case "esc":
		t.scroll = 0
		return nil
	}
	var cmd tea.Cmd
	t.in, cmd = t.in.Update(msg)
	return cmd
}

// browse moves through the history of prompts: dir -1 back, 1 forward.
// It reports whether it moved.
func (t *tui) browse(dir int) bool {
	next := t.hpos + dir
	if next < 0 || next > len(t.history) {
		return false
	}
	if t.hpos == len(t.history) {
		t.draft = t.in.Value()
	}
	t.hpos = next
	if next == len(t.history) {
		t.in.SetValue(t.draft)
	} else {
		t.in.SetValue(t.history[next])
	}
	return true
}

// remember adds a prompt to the history (not twice in a row).
func (t *tui) remember(s string) {
	if strings.TrimSpace(s) != "" && (len(t.history) == 0 || t.history[len(t.history)-1] != s) {
		t.history = append(t.history, s)
	}
	t.hpos = len(t.history)
}

// interrupt handles Ctrl-C: it cancels the run that goes (in `weft
// attach`, it detaches), else clears the prompt, else (twice) exits.
func (t *tui) interrupt() tea.Cmd {
	if t.picker != nil {
		t.picker = nil
		return nil
	}
	if t.run != nil && t.opt.chat == nil {
		t.detached = true
		t.quitting = true
		return tea.Quit
	}
	if t.run != nil {
		if t.run.cancelling {
			t.notice("weft: cancelling…", false)
			return nil
		}
		t.run.cancelling = true
		t.ask = nil
		t.notice("weft: cancelling the run…", false)
		id := t.run.id
		return t.call(func(ctx context.Context, h hostAPI) tea.Msg {
			_, err := h.CancelRun(ctx, api.CancelParams{RunID: id, Reason: "interrupted by the user"})
			if err != nil {
				return infoMsg{err: fmt.Errorf("cancel: %w", err)}
			}
			return nil
		}, func(err error) tea.Msg { return infoMsg{err: fmt.Errorf("cancel: %w", err)} })
	}
	if t.in.Value() != "" {
		t.in.Reset()
		t.hpos = len(t.history)
		return nil
	}
	if t.armed {
		t.quitting = true
		return tea.Quit
	}
	t.armed = true
	t.notice("(Ctrl-C again, or Ctrl-D, exits)", false)
	return nil
}

// submit sends what the prompt holds: a /command, or a prompt. busy is
// how a prompt goes while a run is active: "" steers it (Enter), queue
// makes it the next run (Tab).
func (t *tui) submit(busy string) tea.Cmd {
	text := strings.TrimSpace(t.in.Value())
	if text == "" {
		return nil
	}
	t.in.Reset()
	t.scroll = 0
	if strings.HasPrefix(text, "/") && !strings.Contains(text, "\n") {
		t.remember(text)
		return t.command(text)
	}
	t.remember(text)
	how := "run"
	switch {
	case t.run != nil && busy == api.BusyQueue:
		how = "queue"
	case t.run != nil:
		how = "steer"
	}
	in := &sentInput{text: text, how: how}
	t.sent = append(t.sent, in)
	if t.sessionID == "" {
		if t.creating {
			// The session is on its way: the prompt follows it.
			in.how = "queue"
			return nil
		}
		t.creating = true
		return t.createSession(in)
	}
	return t.start(in)
}

// createSession creates the session a first prompt starts.
func (t *tui) createSession(in *sentInput) tea.Cmd {
	mounts, err := parseMounts(t.mounts)
	if err != nil {
		t.creating = false
		t.sent = t.sent[:0]
		t.notice("weft: "+err.Error(), true)
		return nil
	}
	title := t.newTitle
	if title == "" {
		title = clip(in.text, 60)
	}
	p := api.CreateSessionParams{Title: title, Model: t.model, Mounts: mounts}
	if t.opt.chat != nil {
		p.Network = t.opt.chat.Network
	}
	fail := func(err error) tea.Msg { return createdMsg{err: err} }
	return t.call(func(ctx context.Context, h hostAPI) tea.Msg {
		s, err := h.CreateSession(ctx, p)
		return createdMsg{s: s, err: err}
	}, fail)
}

// created follows the new session and starts the prompts that waited
// for it.
func (t *tui) created(msg createdMsg) tea.Cmd {
	t.creating = false
	if msg.err != nil {
		t.notice("weft: "+t.a.hostModelError(t.conn, withFlags("run", msg.err)).Error(), true)
		t.restoreSent()
		return nil
	}
	t.sessionID, t.title, t.replayTo, t.open = msg.s.ID, msg.s.Title, 0, nil
	t.mounts, t.newTitle = nil, ""
	if t.opt.chat != nil {
		t.mounts = t.opt.chat.Mount
	}
	t.follow(0)
	var cmds []tea.Cmd
	for i, in := range t.sent {
		if i > 0 {
			in.how = "queue"
		}
		cmds = append(cmds, t.start(in))
	}
	return tea.Sequence(cmds...)
}

// restoreSent puts the prompts that could not be sent back in the
// input.
func (t *tui) restoreSent() {
	var texts []string
	for _, in := range t.sent {
		texts = append(texts, in.text)
	}
	t.sent = nil
	if v := t.in.Value(); v != "" {
		texts = append(texts, v)
	}
	t.in.SetValue(strings.Join(texts, "\n"))
}

// start sends a prompt to the session: a run, the next run, or a steer
// of the active run.
func (t *tui) start(in *sentInput) tea.Cmd {
	busy := api.BusyQueue
	if in.how == "steer" {
		busy = api.BusySteer
	}
	p := api.StartRunParams{SessionID: t.sessionID, Input: api.Input(event.TextParts(in.text)), Model: t.model,
		Busy: busy, DefaultPreset: t.ap.defaultPreset()}
	if t.opt.chat != nil {
		p.MaxSteps = t.opt.chat.MaxSteps
	}
	fail := func(err error) tea.Msg { return startedMsg{in: in, err: err} }
	return t.call(func(ctx context.Context, h hostAPI) tea.Msg {
		r, err := h.StartRun(ctx, p)
		return startedMsg{in: in, r: r, err: err}
	}, fail)
}

// started records the receipt of a prompt.
func (t *tui) started(msg startedMsg) tea.Cmd {
	in := msg.in
	if msg.err != nil {
		t.dropSent(in)
		t.notice("weft: "+t.a.hostModelError(t.conn, withFlags("run", msg.err)).Error(), true)
		if t.in.Value() == "" {
			t.in.SetValue(in.text)
		}
		return nil
	}
	if msg.r.Steer != nil {
		in.how, in.steerID = "steer", msg.r.Steer.SteerID
		if t.steersSeen[in.steerID] {
			t.dropSent(in)
		}
		return nil
	}
	in.runID = msg.r.ID
	if in.how == "steer" {
		in.how = "run" // the run ended first: the input is a run of its own
	}
	if t.runsSeen[in.runID] {
		t.dropSent(in)
	}
	return nil
}

func (t *tui) dropSent(in *sentInput) {
	for i, s := range t.sent {
		if s == in {
			t.sent = append(t.sent[:i], t.sent[i+1:]...)
			return
		}
	}
}

// sessionLoaded shows a session read from the host and follows it.
func (t *tui) sessionLoaded(msg sessionMsg) tea.Cmd {
	if msg.err != nil {
		t.notice("weft: "+msg.err.Error(), true)
		return nil
	}
	s := msg.s
	if s.ID != t.sessionID {
		t.tr = transcript{}
		t.run, t.requests, t.ask, t.sent, t.tokens = nil, nil, nil, nil, 0
		t.history, t.hpos, t.prompts = nil, 0, nil
	}
	t.sessionID, t.title, t.replayTo, t.open = s.ID, s.Title, s.LastSeq, msg.open
	if msg.announce {
		t.info(fmt.Sprintf("session %s: %s", s.ID, clip(s.Title, 60)))
	}
	t.follow(msg.after)
	return nil
}

// event shows one event of the session.
func (t *tui) event(e event.Event) tea.Cmd {
	var cmd tea.Cmd
	replay := e.Seq <= t.replayTo
	switch e.Type {
	case event.SessionUpdated:
		var d event.SessionUpdatedData
		if e.Decode(&d) == nil && d.Title != nil {
			t.title = *d.Title
		}
	case event.RunStarted:
		var d event.RunStartedData
		_ = e.Decode(&d)
		t.run = &runState{id: e.RunID, started: e.Time, phase: "starting"}
		if d.Model != "" {
			t.model = d.Model
		}
		cmd = tick()
	case event.MessageUser:
		var d event.MessageUserData
		_ = e.Decode(&d)
		text := event.Text(d.Content)
		t.tr.add(&item{kind: itemUser, runID: e.RunID, text: text})
		t.runsSeen[e.RunID] = true
		t.prompts = append(t.prompts, text)
		for _, in := range t.sent {
			if in.runID == e.RunID {
				t.dropSent(in)
				break
			}
		}
		if replay {
			t.remember(text)
		}
	case event.StepStarted:
		var d event.StepData
		_ = e.Decode(&d)
		if t.run != nil {
			t.run.step, t.run.phase = d.Step, "waiting for the model"
		}
	case event.MessageDelta, event.ReasoningDelta:
		if t.run != nil && t.run.cancelling && t.run.id == e.RunID {
			break // no stray text after Ctrl-C
		}
		var d event.DeltaData
		_ = e.Decode(&d)
		k, phase := itemText, "writing"
		if e.Type == event.ReasoningDelta {
			k, phase = itemReasoning, "thinking"
		}
		t.tr.appendText(k, e.RunID, d.Step, d.Text)
		if t.run != nil {
			t.run.phase = phase
		}
	case event.Usage:
		var d event.UsageData
		_ = e.Decode(&d)
		n := d.Usage.InputTokens + d.Usage.OutputTokens
		t.tokens += n
		if t.run != nil {
			t.run.tokens += n
		}
	case event.ToolCallStarted:
		var d event.ToolCallStartedData
		_ = e.Decode(&d)
		it := t.callItem(e.RunID, d.ToolCall)
		it.running = true
		it.changed()
		if t.run != nil {
			t.run.phase = "running " + d.Name
		}
	case event.ToolCallCompleted:
		var d event.ToolCallCompletedData
		_ = e.Decode(&d)
		it := t.tr.findCall(d.ID)
		if it == nil {
			it = t.callItem(e.RunID, event.ToolCall{ID: d.ID, Name: d.Name})
		}
		it.running, it.done, it.isError, it.durationMs, it.truncated = false, true, d.IsError, d.DurationMs, d.Truncated
		t.tr.setOutput(it, d.Output)
	case event.ApprovalRequested, event.InputRequested:
		p := requestOf(e)
		if p.kind == event.RequestApproval {
			it := t.callItem(e.RunID, p.call)
			it.requestID, it.approval = p.id, "waiting"
			it.changed()
			if t.run != nil {
				t.run.phase = "waiting for approval of " + p.call.Name
			}
		} else {
			t.tr.add(&item{kind: itemQuestion, runID: e.RunID, requestID: p.id, call: p.call, text: p.question, choices: p.choices, approval: "waiting"})
			if t.run != nil {
				t.run.phase = "waiting for an answer"
			}
		}
		if !replay || t.open[p.id] {
			t.queueRequest(p)
		}
	case event.ApprovalResolved, event.ApprovalExpired, event.InputResolved:
		t.resolved(e)
	case event.ToolCallRequested:
		if t.run != nil {
			var d event.ToolCallRequestedData
			_ = e.Decode(&d)
			t.run.phase = "waiting for the client's " + d.ToolCall.Name
		}
	case event.RunResumed:
		if t.run != nil {
			t.run.phase = "resuming"
		}
	case event.ModelRetry:
		var d event.ModelRetryData
		_ = e.Decode(&d)
		t.notice(fmt.Sprintf("weft: model request failed (%s); retry %d in %d ms", d.Error, d.Attempt, d.DelayMs), true)
	case event.SteerConsumed:
		var d event.SteerData
		_ = e.Decode(&d)
		t.tr.add(&item{kind: itemSteer, runID: e.RunID, text: event.Text(d.Input)})
		t.steersSeen[d.SteerID] = true
		for _, in := range t.sent {
			if in.steerID == d.SteerID {
				t.dropSent(in)
				break
			}
		}
	case event.SteerDropped:
		var d event.SteerData
		_ = e.Decode(&d)
		t.steersSeen[d.SteerID] = true
		for _, in := range t.sent {
			if in.steerID == d.SteerID {
				t.dropSent(in)
				if !replay {
					t.notice("weft: the run ended before the model read your steer; it is back in the prompt", true)
					t.in.SetValue(strings.TrimSpace(in.text + "\n" + t.in.Value()))
				}
				break
			}
		}
	case event.RunCompleted, event.RunFailed, event.RunCancelled, event.RunInterrupted:
		cmd = t.runEnded(e)
	}
	return cmd
}

// callItem is the item of call c, made if it is new.
func (t *tui) callItem(runID string, c event.ToolCall) *item {
	if it := t.tr.findCall(c.ID); it != nil {
		if it.call.Arguments == "" {
			it.call = c
		}
		return it
	}
	return t.tr.add(&item{kind: itemCall, runID: runID, call: c})
}

// queueRequest queues a request to ask, asking it if none is asked.
func (t *tui) queueRequest(p *pending) {
	for _, q := range t.requests {
		if q.id == p.id {
			return
		}
	}
	t.requests = append(t.requests, p)
	t.nextAsk()
}

// nextAsk asks the first request queued, if none is asked.
func (t *tui) nextAsk() {
	if t.ask != nil || len(t.requests) == 0 {
		if t.ask != nil {
			t.ask.waiting = len(t.requests) - 1
		}
		return
	}
	t.ask = newAsker(t.requests[0])
	t.ask.waiting = len(t.requests) - 1
	t.in.Blur()
}

// dropRequest forgets request id; if it was asked, the next is.
func (t *tui) dropRequest(id string) {
	for i, q := range t.requests {
		if q.id == id {
			t.requests = append(t.requests[:i], t.requests[i+1:]...)
			break
		}
	}
	if t.ask != nil && t.ask.p.id == id {
		t.ask = nil
	}
	t.nextAsk()
	if t.ask == nil {
		t.in.Focus()
	}
}

// answer sends the answer to request p.
func (t *tui) answer(p *pending, ans answer) tea.Cmd {
	t.answered[p.id] = ans.words(p)
	t.dropRequest(p.id)
	if it := t.tr.findRequest(p.id); it != nil {
		it.approval = "answering: " + ans.words(p)
		it.changed()
	}
	sid := t.sessionID
	fail := func(err error) tea.Msg { return answeredMsg{p: p, ans: ans, err: err} }
	return t.call(func(ctx context.Context, h hostAPI) tea.Msg {
		var err error
		if p.kind == event.RequestApproval {
			_, err = h.DecideApproval(ctx, api.DecideParams{ApprovalID: p.id, SessionID: sid, Decision: ans.decision, Message: ans.message})
		} else {
			_, err = h.AnswerInput(ctx, api.AnswerParams{RequestID: p.id, SessionID: sid, Choice: ans.choice, Text: ans.text})
		}
		return answeredMsg{p: p, ans: ans, err: err}
	}, fail)
}

// answeredReply handles the host's reply to an answer.
func (t *tui) answeredReply(msg answeredMsg) tea.Cmd {
	p := msg.p
	it := t.tr.findRequest(p.id)
	var ae *api.Error
	switch {
	case msg.err == nil:
		return nil
	case errors.As(msg.err, &ae) && ae.Kind == api.KindAlreadyResolved:
		by, _ := ae.Data["resolvedBy"].(string)
		if by == "" {
			by = "another client"
		}
		what, _ := ae.Data["decision"].(string)
		if what == "" {
			what, _ = ae.Data["status"].(string)
		}
		delete(t.answered, p.id)
		if it != nil {
			it.approval = fmt.Sprintf("already answered by %s: %s", by, what)
			it.changed()
		}
	default:
		// Not answered: ask again.
		delete(t.answered, p.id)
		t.notice("weft: "+msg.err.Error(), true)
		if it != nil {
			it.approval = "waiting"
			it.changed()
		}
		t.requests = append([]*pending{p}, t.requests...)
		t.nextAsk()
	}
	return nil
}

// resolved records the end of a request under its call: answered here,
// elsewhere, or expired.
func (t *tui) resolved(e event.Event) {
	var id, what string
	var by event.By
	switch e.Type {
	case event.ApprovalResolved, event.ApprovalExpired:
		var d event.ApprovalResolvedData
		_ = e.Decode(&d)
		id, what, by = d.ApprovalID, decisionWords(d.Decision), d.By
		if d.Message != "" {
			what += ": " + fmt.Sprintf("%q", clip(d.Message, 80))
		}
		if e.Type == event.ApprovalExpired {
			what = "expired: " + decisionWords(d.Decision)
		}
	default:
		var d event.InputResolvedData
		_ = e.Decode(&d)
		id, what, by = d.RequestID, d.Status, d.By
		if d.Status == event.InputAnswered {
			what = fmt.Sprintf("answered %q", clip(d.Text, 60))
		}
	}
	wasAsked := t.ask != nil && t.ask.p.id == id
	t.dropRequest(id)
	it := t.tr.findRequest(id)
	if it == nil {
		return
	}
	switch {
	case t.answered[id] != "":
		it.approval = t.answered[id]
	case by.Policy == "cancel":
		it.approval = "cancelled with the run"
	case wasAsked:
		it.approval = fmt.Sprintf("already answered by %s: %s", who(by), what)
	default:
		it.approval = fmt.Sprintf("%s (by %s)", what, who(by))
	}
	it.changed()
}

// runEnded closes the active run.
func (t *tui) runEnded(e event.Event) tea.Cmd {
	var d event.RunEndedData
	_ = e.Decode(&d)
	words := strings.TrimPrefix(string(e.Type), "run.")
	s := fmt.Sprintf("· %s · %d step(s) · %s tokens", words, d.Steps, compactCount(d.Usage.InputTokens+d.Usage.OutputTokens))
	if t.run != nil && t.run.id == e.RunID && !t.run.started.IsZero() {
		s += " · " + e.Time.Sub(t.run.started).Truncate(100*time.Millisecond).String()
	}
	t.tr.add(&item{kind: itemRunEnd, runID: e.RunID, text: s})
	if d.Error != nil && e.Type == event.RunFailed {
		t.notice(fmt.Sprintf("weft: run %s failed: %s: %s", e.RunID, d.Error.Kind, d.Error.Message), true)
	}
	if e.Type == event.RunInterrupted {
		t.notice(fmt.Sprintf("weft: run %s interrupted (the host stopped under it)", e.RunID), true)
	}
	if t.run != nil && t.run.id == e.RunID {
		t.run = nil
	}
	// Its requests are closed with it.
	var keep []*pending
	for _, q := range t.requests {
		if q.runID != e.RunID {
			keep = append(keep, q)
		}
	}
	t.requests = keep
	if t.ask != nil && t.ask.p.runID == e.RunID {
		t.ask = nil
		t.in.Focus()
	}
	t.nextAsk()
	if t.opt.runID != "" && e.RunID == t.opt.runID {
		t.ended = e.Type
		t.quitting = true
		return tea.Quit
	}
	return nil
}

// View draws the UI.
func (t *tui) View() tea.View {
	var v tea.View
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "weft"
	if t.title != "" {
		v.WindowTitle = "weft · " + t.title
	}
	if t.width == 0 || t.height == 0 {
		return v
	}
	w := t.width
	var bottom []string
	// What was sent and not yet seen by the model.
	for _, in := range t.sent {
		what := "sending"
		switch {
		case in.how == "steer" && in.steerID != "":
			what = "steer (next step)"
		case in.how == "steer":
			what = "steering"
		case in.how == "queue":
			what = "queued as the next run"
		case in.runID != "":
			what = "starting"
		}
		bottom = append(bottom, t.th.notice.Render(clipWidth("⇢ "+what+": "+in.text, w)))
	}
	switch {
	case t.picker != nil:
		bottom = append(bottom, strings.Split(t.picker.view(t.th, w, t.sessionID), "\n")...)
	case t.ask != nil:
		bottom = append(bottom, strings.Split(t.ask.view(t.th, w), "\n")...)
	}
	bottom = append(bottom, t.statusLine(w))
	input := strings.Split(t.in.View(), "\n")
	if t.ask != nil || t.picker != nil {
		// The draft stays, dimmed, while a request or the picker has the keys.
		for i, l := range input {
			input[i] = t.th.dim.Render(ansi.Strip(l))
		}
	}
	bottom = append(bottom, input...)
	bottom = append(bottom, t.th.dim.Render(clipWidth(t.hints(), w)))
	h := max(0, t.height-len(bottom))
	if len(bottom) > t.height {
		bottom = bottom[len(bottom)-t.height:]
	}
	top := t.transcriptView(w, h)
	v.SetContent(strings.Join(append(top, bottom...), "\n"))
	return v
}

// transcriptHeight is the rows the transcript had at the last draw.
func (t *tui) transcriptHeight() int { return len(t.shown) }

// transcriptView is the transcript's last h rows (scrolled up by
// t.scroll), padded at the top.
func (t *tui) transcriptView(w, h int) []string {
	need := h + t.scroll
	var rows []string
	var owners []*item
	for i := len(t.tr.items) - 1; i >= 0 && len(rows) < need; i-- {
		it := t.tr.items[i]
		ls := it.lines(t.th, w, t.expanded)
		rows = append(append([]string(nil), ls...), rows...)
		own := make([]*item, len(ls))
		for j := range own {
			own[j] = it
		}
		owners = append(own, owners...)
	}
	if t.scroll > max(0, len(rows)-h) {
		t.scroll = max(0, len(rows)-h)
	}
	end := len(rows) - t.scroll
	start := max(0, end-h)
	rows, owners = rows[start:end], owners[start:end]
	if t.scroll > 0 && len(rows) > 0 {
		rows[len(rows)-1] = t.th.dim.Render(clipWidth(fmt.Sprintf("── %d lines below · PgDn or Esc returns ──", t.scroll), w))
	}
	for len(rows) < h {
		rows = append([]string{""}, rows...)
		owners = append([]*item{nil}, owners...)
	}
	t.shown = owners
	return rows
}

// statusLine says which model, what the run does, since when, the
// tokens used, and which session.
func (t *tui) statusLine(w int) string {
	model := t.model
	switch {
	case model == "":
		model = "default model"
	case strings.HasPrefix(model, "scripted:"):
		model = "scripted:" + filepath.Base(strings.TrimPrefix(model, "scripted:"))
	}
	parts := []string{model}
	if r := t.run; r != nil {
		phase := r.phase
		if r.step > 0 {
			phase = fmt.Sprintf("step %d: %s", r.step, phase)
		}
		if r.cancelling {
			phase = "cancelling"
		}
		parts = append(parts, phase)
		if !r.started.IsZero() {
			parts = append(parts, time.Since(r.started).Truncate(time.Second).String())
		}
		parts = append(parts, compactCount(r.tokens)+" tokens")
	} else if t.tokens > 0 {
		parts = append(parts, compactCount(t.tokens)+" tokens")
	}
	switch {
	case t.sessionID == "":
		parts = append(parts, "new session")
	case t.title != "":
		parts = append(parts, clip(t.title, 40)+" ("+t.sessionID+")")
	default:
		parts = append(parts, t.sessionID)
	}
	return t.th.dim.Render(clipWidth("· "+strings.Join(parts, " · "), w))
}

// hints names the keys that do something now.
func (t *tui) hints() string {
	switch {
	case t.picker != nil:
		return "↑↓ choose · enter switches · esc closes"
	case t.ask != nil && t.ask.typing():
		return "enter answers · ctrl+c cancels the run"
	case t.ask != nil:
		return "one key answers · ctrl+c cancels the run · ctrl+o expands outputs"
	case t.run != nil && t.opt.chat == nil:
		return "enter steers · tab queues the next run · ctrl+c detaches · /cancel cancels the run · ctrl+o expands"
	case t.run != nil:
		return "enter steers the run · tab queues the next run · alt+enter newline · ctrl+c cancels · ctrl+o expands"
	}
	return "enter sends · alt+enter or ctrl+j newline · ↑ history · pgup scrolls · ctrl+o expands outputs · ctrl+d exits"
}
