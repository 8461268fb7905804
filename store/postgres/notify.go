package postgres

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventsChannel is the LISTEN/NOTIFY channel on which every append
// announces "SESSION SEQ": the session and the seq of the batch's last
// event. PostgreSQL delivers a notification at its transaction's commit,
// in commit order, to every listening connection, so a host learns of
// another host's appends within a round trip and reads the events
// themselves from the log.
const eventsChannel = "weft_events"

// notifySQL announces an append; queued last in its batch.
const notifySQL = `SELECT pg_notify('` + eventsChannel + `', $1)`

// notice is the payload of an append of session through seq.
func notice(session string, seq int64) string {
	return session + " " + strconv.FormatInt(seq, 10)
}

// parseNotice splits a payload into its session and seq.
func parseNotice(p string) (string, int64, bool) {
	i := strings.LastIndexByte(p, ' ')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(p[i+1:], 10, 64)
	return p[:i], seq, err == nil
}

// NotifierConfig configures [NewNotifier]. Zero fields select the
// defaults.
type NotifierConfig struct {
	// Logger receives lost and restored connections. Nil means silent.
	Logger *slog.Logger
}

// Notifier tells a host when any host commits to the log of a session it
// follows: one connection of its own LISTENs on the appends'
// notifications, each carrying only (session, seq), and wakes the
// followers of that session, which read the events from the store. A
// notification can be lost with its connection: on every (re)connection
// the notifier wakes every follower, so each reads what it may have
// missed, and the notifier reconnects with a backoff up to two seconds
// while the database is away. Create it with [NewNotifier] and stop it
// with [Notifier.Close]. Its methods are safe for concurrent use.
type Notifier struct {
	cfg    *pgx.ConnConfig
	name   string
	logger *slog.Logger

	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	follows map[string]map[*follow]struct{}
}

// follow is one follower of a session: a wake-up channel of one slot and
// the highest seq notified.
type follow struct {
	c   chan struct{}
	seq int64 // guarded by the Notifier's mu
}

// NewNotifier starts listening for the appends to st's database.
func NewNotifier(st *Store, cfg NotifierConfig) *Notifier {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	n := &Notifier{cfg: st.pool.Config().ConnConfig.Copy(), name: st.name, logger: cfg.Logger,
		ctx: ctx, stop: stop, done: make(chan struct{}), follows: map[string]map[*follow]struct{}{}}
	go n.loop()
	return n
}

// Follow returns a channel that receives a value (at most one is
// pending) after any host commits events to session sessionID, and
// after the notifier (re)connects, when a notification may have been
// lost; and stop, which ends the follow (call it once). A receiver reads
// the log after its cursor at each wake-up; a wake-up may find nothing
// new.
func (n *Notifier) Follow(sessionID string) (wake <-chan struct{}, stop func()) {
	f := &follow{c: make(chan struct{}, 1)}
	n.mu.Lock()
	m := n.follows[sessionID]
	if m == nil {
		m = map[*follow]struct{}{}
		n.follows[sessionID] = m
	}
	m[f] = struct{}{}
	n.mu.Unlock()
	return f.c, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if m := n.follows[sessionID]; m != nil {
			delete(m, f)
			if len(m) == 0 {
				delete(n.follows, sessionID)
			}
		}
	}
}

// Close stops listening. It is safe to call more than once.
func (n *Notifier) Close() error {
	n.stop()
	<-n.done
	return nil
}

// loop connects, listens and dispatches notifications until Close.
func (n *Notifier) loop() {
	defer close(n.done)
	backoff := 50 * time.Millisecond
	for n.ctx.Err() == nil {
		err := n.listen()
		if n.ctx.Err() != nil {
			return
		}
		n.logger.Warn("listen for other hosts' events; reconnecting", "store", n.name, "err", classify(n.name, "listen", err), "in", backoff)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// listen holds one connection until it fails or the notifier closes.
func (n *Notifier) listen() error {
	conn, err := pgx.ConnectConfig(n.ctx, n.cfg)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(ctx)
	}()
	if _, err := conn.Exec(n.ctx, "LISTEN "+eventsChannel); err != nil {
		return err
	}
	n.wakeAll()
	for {
		msg, err := conn.WaitForNotification(n.ctx)
		if err != nil {
			return err
		}
		if id, seq, ok := parseNotice(msg.Payload); ok {
			n.wake(id, seq)
		}
	}
}

// wake wakes the followers of session id that have not been told of seq.
func (n *Notifier) wake(id string, seq int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for f := range n.follows[id] {
		if seq <= f.seq {
			continue
		}
		f.seq = seq
		select {
		case f.c <- struct{}{}:
		default:
		}
	}
}

// wakeAll wakes every follower.
func (n *Notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.follows {
		for f := range m {
			select {
			case f.c <- struct{}{}:
			default:
			}
		}
	}
}
