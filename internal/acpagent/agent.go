package acpagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// FollowFunc yields a session's events after the cursor after, the
// replay and then the live tail, until ctx ends or the host gives an
// error retrying cannot fix. client.Follow (with a dialer) is one.
type FollowFunc func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error]

// Config configures an agent. Zero fields take the defaults documented
// on each.
type Config struct {
	// Host is the weft host the agent drives: a *client.Client connected
	// to a `weft serve`, or a host in this process. Host or Dial is
	// required.
	Host api.Host
	// Follow follows a session's log; nil subscribes once through
	// Host.Subscribe (no reconnection when the subscription ends).
	Follow FollowFunc
	// Dial, when Host is nil, opens the host (and its Follow) the first
	// time a method needs it, so that initialize is answered before a
	// host is dialed or opened. Its error is that method's error, and the
	// next method dials again. Serve does not close what Dial opened.
	Dial func(ctx context.Context) (api.Host, FollowFunc, error)
	// Model is the model of the sessions the agent creates
	// (PROVIDER:MODEL or a name from the host's configuration); "" is the
	// host's default.
	Model string
	// Mode is the approval preset a new session starts in: one of
	// api.PresetAskWrites (the default, "" means it), PresetAskAll,
	// PresetReadOnly, PresetNeverAsk. A client switches it with
	// session/set_mode.
	Mode string
	// Busy is what a prompt does while the session has an active run,
	// for the sessions the agent creates: api.BusyQueue (the default) or
	// api.BusySteer. A client switches it per session with the session's
	// "busy" config option; a loaded session takes the policy its last
	// run was admitted under.
	Busy string
	// Version is the version the agent names in initialize; "" is "dev".
	Version string
	// Logger receives what the agent cannot tell the client; nil is
	// silent.
	Logger *slog.Logger
}

// endedRuns bounds how many terminal events of runs a session keeps for
// the prompts that wait for them.
const endedRuns = 64

// Serve speaks ACP with the client on r (what the client writes) and w
// (what it reads) until the client closes r or ctx ends, and returns
// after every goroutine it started has stopped. The runs it started go
// on in the host. The caller owns r and w; when ctx ends first, it
// closes r so that the connection's reader stops. Serve returns an error
// only for a bad Config.
func Serve(ctx context.Context, cfg Config, r io.Reader, w io.Writer) error {
	if (cfg.Host == nil) == (cfg.Dial == nil) {
		return errors.New("acpagent: one of Config.Host and Config.Dial is required")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = api.PresetAskWrites
	case api.PresetAskWrites, api.PresetAskAll, api.PresetReadOnly, api.PresetNeverAsk:
	default:
		return fmt.Errorf("acpagent: mode %q: want ask-writes, ask-all, read-only or never-ask", cfg.Mode)
	}
	switch cfg.Busy {
	case "":
		cfg.Busy = api.BusyQueue
	case api.BusyQueue, api.BusySteer:
	default:
		return fmt.Errorf("acpagent: busy %q: want queue or steer", cfg.Busy)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &agent{cfg: cfg, ctx: ctx, sessions: make(map[string]*session), ready: make(chan struct{})}
	if cfg.Host != nil {
		a.h, a.follow = cfg.Host, orSubscribe(cfg.Host, cfg.Follow)
	}
	a.conn = acp.NewAgentSideConnection(a, w, r)
	a.conn.SetLogger(cfg.Logger)
	close(a.ready)
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
	}
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	cancel()
	a.wg.Wait()
	return nil
}

// orSubscribe is follow, or, when nil, a follow that subscribes once
// through h.
func orSubscribe(h api.Host, follow FollowFunc) FollowFunc {
	if follow != nil {
		return follow
	}
	return func(ctx context.Context, sessionID string, after int64) iter.Seq2[event.Event, error] {
		return func(yield func(event.Event, error) bool) {
			seq, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: sessionID, After: after})
			if err != nil {
				yield(event.Event{}, err)
				return
			}
			for e, err := range seq {
				if !yield(e, err) || err != nil {
					return
				}
			}
		}
	}
}

// agent is one ACP connection: the sessions it attached and the
// goroutines that stream them. The SDK calls its methods concurrently
// (requests) and in order (notifications).
type agent struct {
	cfg  Config
	ctx  context.Context          // the connection's life; ends when Serve returns
	conn *acp.AgentSideConnection // set before ready is closed
	// ready is closed once conn is set: the SDK may call a method before
	// NewAgentSideConnection returns.
	ready chan struct{}

	// hmu guards h and follow, set once: at Serve, or by the first
	// method that needs the host (Config.Dial).
	hmu    sync.Mutex
	h      api.Host
	follow FollowFunc

	mu       sync.Mutex
	closed   bool
	sessions map[string]*session
	wg       sync.WaitGroup // streamers and permission askers; Add under mu while !closed
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

// host is the weft host, dialed (Config.Dial) on first need.
func (a *agent) host(ctx context.Context) (api.Host, error) {
	a.hmu.Lock()
	defer a.hmu.Unlock()
	if a.h != nil {
		return a.h, nil
	}
	h, follow, err := a.cfg.Dial(ctx)
	if err != nil {
		return nil, &acp.RequestError{Code: -32603, Message: "weft: no host: " + err.Error(), Data: map[string]any{"kind": "host_unavailable"}}
	}
	a.h, a.follow = h, orSubscribe(h, follow)
	return a.h, nil
}

// client is the connection to the client, once it is set.
func (a *agent) client() *acp.AgentSideConnection {
	<-a.ready
	return a.conn
}

// hostCtx is a handler's ctx for the host: it ends with ctx or the
// connection, and carries the values of the ctx Serve was given (a host
// in this process learns from them which client answered).
func (a *agent) hostCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	hctx, cancel := context.WithCancel(a.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return hctx, func() { stop(); cancel() }
}

// goSafe starts f as a goroutine the agent waits for, unless the agent
// is closing.
func (a *agent) goSafe(f func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
	return true
}

// Initialize implements acp.Agent: weft loads sessions, takes text and
// embedded text resources in prompts, and lists sessions.
func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	title := "weft"
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:         true,
			PromptCapabilities:  acp.PromptCapabilities{EmbeddedContext: true},
			SessionCapabilities: acp.SessionCapabilities{List: &acp.SessionListCapabilities{}},
		},
		AgentInfo:   &acp.Implementation{Name: "weft", Title: &title, Version: a.cfg.Version},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

// Authenticate implements acp.Agent; weft advertises no authentication
// method (the host's own token guards it), so there is nothing to do.
func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// NewSession implements acp.Agent: a weft session whose default
// read-write mount (also the shells' default) is the client's cwd, with
// each additional directory mounted read-write beside it.
func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	ctx, done := a.hostCtx(ctx)
	defer done()
	if !filepath.IsAbs(p.Cwd) {
		return acp.NewSessionResponse{}, acp.NewInvalidParams(map[string]any{"cwd": p.Cwd, "error": "cwd must be an absolute path"})
	}
	mounts := []event.Mount{{ID: "work", Kind: event.KindLocal, Path: filepath.Clean(p.Cwd), Mode: event.ModeReadWrite, Default: true, DefaultForShell: true}}
	for i, d := range p.AdditionalDirectories {
		if !filepath.IsAbs(d) {
			return acp.NewSessionResponse{}, acp.NewInvalidParams(map[string]any{"additionalDirectories": d, "error": "an additional directory must be an absolute path"})
		}
		mounts = append(mounts, event.Mount{ID: "dir" + strconv.Itoa(i+1), Kind: event.KindLocal, Path: filepath.Clean(d), Mode: event.ModeReadWrite})
	}
	h, err := a.host(ctx)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	if _, err := h.CheckModel(ctx, api.ModelCheckParams{Model: a.cfg.Model}); err != nil && !errors.Is(err, &api.Error{Kind: api.KindMethodNotFound}) {
		return acp.NewSessionResponse{}, wireError(err)
	}
	s, err := h.CreateSession(ctx, api.CreateSessionParams{
		Model: a.cfg.Model, Mounts: mounts,
		Metadata: map[string]string{"client": "acp", "acp.mode": a.cfg.Mode},
	})
	if err != nil {
		return acp.NewSessionResponse{}, wireError(err)
	}
	ss, err := a.attach(s.ID, s.LastSeq, a.cfg.Mode, s.Title != "")
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	return acp.NewSessionResponse{SessionId: acp.SessionId(s.ID), Modes: ss.modeState(), ConfigOptions: ss.configOptions()}, nil
}

// LoadSession implements acp.AgentLoader: it replays the session's whole
// log as session/update notifications, answers once the replay reached
// the log's end as it was when asked, and goes on streaming what
// follows (a run still going on, say). The approvals still open are
// asked again.
func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	ctx, done := a.hostCtx(ctx)
	defer done()
	h, err := a.host(ctx)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s, err := h.GetSession(ctx, api.SessionGetParams{SessionID: string(p.SessionId)})
	if err != nil {
		return acp.LoadSessionResponse{}, wireError(err)
	}
	mode := s.Metadata["acp.mode"]
	if mode == "" {
		mode = a.cfg.Mode
	}
	ss, err := a.attach(s.ID, s.LastSeq, mode, s.Title != "")
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	if err := ss.waitSeq(ctx, s.LastSeq); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	return acp.LoadSessionResponse{Modes: ss.modeState(), ConfigOptions: ss.configOptions()}, nil
}

// attach starts streaming session id to the client from its first
// event, replacing a stream this connection had of it; head is the
// log's end when the client asked, the replay's end.
func (a *agent) attach(id string, head int64, mode string, titled bool) (*session, error) {
	a.hmu.Lock()
	h, follow := a.h, a.follow
	a.hmu.Unlock()
	s := newSession(a, h, follow, id, head, mode)
	s.titled.Store(titled)
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, acp.NewInternalError(map[string]any{"error": "the connection is closing"})
	}
	old := a.sessions[id]
	a.sessions[id] = s
	a.mu.Unlock()
	if old != nil {
		old.stop()
	}
	if !a.goSafe(s.stream) {
		return nil, acp.NewInternalError(map[string]any{"error": "the connection is closing"})
	}
	return s, nil
}

// session returns the session id this connection attached, or an error
// naming what the client should do.
func (a *agent) session(ctx context.Context, id acp.SessionId) (*session, error) {
	a.mu.Lock()
	s := a.sessions[string(id)]
	a.mu.Unlock()
	if s != nil {
		return s, nil
	}
	h, err := a.host(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := h.GetSession(ctx, api.SessionGetParams{SessionID: string(id)}); err != nil {
		return nil, wireError(err)
	}
	return nil, acp.NewInvalidParams(map[string]any{"sessionId": id, "error": "session " + string(id) + " is not loaded on this connection: call session/load first"})
}

// ListSessions implements acp.Agent: the host's sessions, the latest
// updated first, a page at a time; with cwd, only those whose default
// mount is that directory.
func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	ctx, done := a.hostCtx(ctx)
	defer done()
	lp := api.ListSessionsParams{Limit: 100}
	if p.Cursor != nil {
		lp.Cursor = *p.Cursor
	}
	h, err := a.host(ctx)
	if err != nil {
		return acp.ListSessionsResponse{}, err
	}
	res, err := h.ListSessions(ctx, lp)
	if err != nil {
		return acp.ListSessionsResponse{}, wireError(err)
	}
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for _, s := range res.Sessions {
		cwd := ""
		for _, m := range s.Binding.Mounts {
			if m.Default {
				cwd = m.Path
			}
		}
		if p.Cwd != nil && filepath.Clean(*p.Cwd) != cwd {
			continue
		}
		info := acp.SessionInfo{SessionId: acp.SessionId(s.ID), Cwd: cwd, UpdatedAt: acp.Ptr(s.UpdatedAt.UTC().Format(time.RFC3339Nano))}
		if s.Title != "" {
			info.Title = acp.Ptr(s.Title)
		}
		out.Sessions = append(out.Sessions, info)
	}
	if res.NextCursor != "" {
		out.NextCursor = acp.Ptr(res.NextCursor)
	}
	return out, nil
}

// Prompt implements acp.Agent: it starts a run with the prompt (or, while
// the session has an active run, queues it or steers the active run, as
// the session's busy option says; or, when a run asked the user a
// question, answers it), and answers when that run ended and its every
// update was sent, with the run's stop reason. A failed or interrupted
// run is an error carrying the run's. The SDK cancels ctx when another
// prompt of the session arrives; the run's end, a session/cancel or the
// connection's end is what ends a prompt.
func (a *agent) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	ctx := a.ctx
	s, err := a.session(ctx, p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	input, err := promptInput(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	text := event.Text(input)
	if s.titled.CompareAndSwap(false, true) {
		// An untitled session takes its first prompt as its title, as
		// weft run's do; the editor hears of it as session_info_update.
		title := clip(text, 60)
		if _, err := s.h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: s.id, Title: &title}); err != nil {
			a.cfg.Logger.Warn("acp: title the session", "session", s.id, "err", err)
		}
	}
	s.expectEcho(text)
	// A run that asked the user a question takes the prompt as the
	// answer, and the prompt follows that run.
	for {
		q, ok := s.nextQuestion()
		if !ok {
			break
		}
		_, err := s.h.AnswerInput(ctx, api.AnswerParams{RequestID: q.id, SessionID: s.id, Text: text})
		if err == nil {
			return a.await(s, q.run)
		}
		if !errors.Is(err, &api.Error{Kind: api.KindAlreadyResolved}) {
			s.dropEcho(text)
			return acp.PromptResponse{}, wireError(err)
		}
	}
	// ctx is the connection's, not the SDK's, which a later prompt of the
	// session cancels: admission is the host's to refuse, not the race's.
	r, err := s.h.StartRun(ctx, api.StartRunParams{
		SessionID: s.id, Input: input, Model: a.cfg.Model, Busy: s.currentBusy(), DefaultPreset: s.currentMode(),
	})
	if err != nil {
		s.dropEcho(text)
		return acp.PromptResponse{}, wireError(err)
	}
	return a.await(s, r.ID)
}

// await waits for run, for a prompt, and answers as the run ended.
func (a *agent) await(s *session, run string) (acp.PromptResponse, error) {
	s.addPrompt(run)
	defer s.removePrompt(run)
	end, err := s.waitRun(run)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	return end.response()
}

// Cancel implements acp.Agent: it cancels the session's active run and
// the runs this connection's prompts queued; the prompts then answer
// "cancelled" once the host closed their tool calls. A cancel when no
// run is active does nothing.
func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	ctx := a.ctx
	s, err := a.session(ctx, p.SessionId)
	if err != nil {
		return err
	}
	runs := s.promptRuns()
	if cur, err := s.h.GetSession(ctx, api.SessionGetParams{SessionID: s.id}); err == nil && cur.ActiveRunID != "" {
		runs = append(runs, cur.ActiveRunID)
	}
	seen := map[string]bool{}
	for _, id := range runs {
		if seen[id] {
			continue
		}
		seen[id] = true
		_, err := s.h.CancelRun(ctx, api.CancelParams{RunID: id, Reason: "cancelled by the ACP client"})
		if err != nil && !errors.Is(err, &api.Error{Kind: api.KindRunConflict}) {
			a.cfg.Logger.Warn("acp: cancel run", "session", s.id, "run", id, "err", err)
		}
	}
	return nil
}

// SetSessionMode implements acp.Agent: the session's runs from now on
// take the mode's approval preset.
func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	ctx, done := a.hostCtx(ctx)
	defer done()
	s, err := a.session(ctx, p.SessionId)
	if err != nil {
		return acp.SetSessionModeResponse{}, err
	}
	if !validMode(string(p.ModeId)) {
		return acp.SetSessionModeResponse{}, acp.NewInvalidParams(map[string]any{"modeId": p.ModeId, "error": "unknown mode: want ask-writes, ask-all, read-only or never-ask"})
	}
	s.setMode(string(p.ModeId))
	return acp.SetSessionModeResponse{}, nil
}

// CloseSession implements acp.Agent: it stops streaming the session to
// this client; the session and its runs stay in the host.
func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	s := a.sessions[string(p.SessionId)]
	delete(a.sessions, string(p.SessionId))
	a.mu.Unlock()
	if s == nil {
		return acp.CloseSessionResponse{}, acp.NewInvalidParams(map[string]any{"sessionId": p.SessionId, "error": "session not loaded on this connection"})
	}
	s.stop()
	return acp.CloseSessionResponse{}, nil
}

// ResumeSession implements acp.Agent; weft loads sessions instead.
func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

// SetSessionConfigOption implements acp.Agent: the session's one option,
// "busy", is what its prompts do while a run is active (queue or steer).
func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	ctx, done := a.hostCtx(ctx)
	defer done()
	v := p.ValueId
	if v == nil {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": "weft's session options are selects: give a value"})
	}
	s, err := a.session(ctx, v.SessionId)
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	switch {
	case v.ConfigId != busyOption:
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"configId": v.ConfigId, "error": "unknown option: weft's is \"busy\""})
	case v.Value != api.BusyQueue && v.Value != api.BusySteer:
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"value": v.Value, "error": "busy: want queue or steer"})
	}
	s.setBusy(string(v.Value))
	return acp.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions()}, nil
}
