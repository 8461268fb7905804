// Package journal is the single writer of one session's log. It assigns
// sequence numbers, folds every event into the session's projection, groups
// concurrent appends into one store transaction (group commit), coalesces
// streamed deltas, and fans committed events out to subscribers: nothing is
// published before it is durable.
package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/redact"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

// keepEnded is how many ended runs the projection keeps records of, for
// the owner's lookups right after a run ends.
const keepEnded = 16

// ErrClosed reports use of a closed journal.
var ErrClosed = errors.New("journal closed")

// Store is what a journal needs of the store: it appends the session's
// batches, reads the log for subscribers that are behind, and loads the
// session's records (the session, its unended runs and open requests)
// when it opens or when a write failed. Every [store.Store] is one.
type Store interface {
	Append(ctx context.Context, b store.Batch) error
	Read(ctx context.Context, p store.ReadParams) ([]event.Event, error)
	Session(ctx context.Context, id string) (record.Session, error)
	Runs(ctx context.Context, p store.ListRunsParams) ([]record.Run, error)
	Requests(ctx context.Context, p store.ListRequestsParams) ([]record.Request, error)
}

// Config configures a [Journal]. Zero fields take the documented defaults.
type Config struct {
	// Store holds the log. Required.
	Store Store
	// CoalesceWindow is how long a delta event may collect text before it is
	// committed. Zero means 50 ms.
	CoalesceWindow time.Duration
	// CoalesceBytes is the most text one delta event collects. Zero means 16 KiB.
	CoalesceBytes int
	// MaxBatch caps the events of one transaction. Zero means 1024.
	MaxBatch int
	// Now returns the time stamped on events. Nil means time.Now.
	Now func() time.Time
	// Epoch is the writer's lease epoch, carried by every batch
	// ([store.Batch.Epoch]) so that the store refuses the journal's
	// appends once the lease has moved on ([store.ErrFenced]). Zero means
	// unfenced.
	Epoch int64
	// Logger receives write failures. Nil means silent.
	Logger *slog.Logger
	// WakeSpacing paces the wakes of the subscribers. Each wake costs
	// every waiting subscriber a trip through the scheduler, so with n
	// subscribers they are woken at most once per n × WakeSpacing, capped
	// at 10 ms, and the batches committed in between are delivered
	// together at the next wake: one subscriber wakes at every commit, a
	// thousand share a wake every 10 ms. Zero means 10 µs; a negative
	// value wakes them at every commit.
	WakeSpacing time.Duration
	// EncodedWakeSpacing is WakeSpacing for the subscribers of
	// [Journal.EncodedEvents], whose consumers write what each wake
	// brings to a connection: a wake costs them a write system call as
	// well, so they count for more in the spacing, and a wake carries
	// more events. The spacing of the wakes is the sum of every
	// subscriber's, capped at 10 ms: 100 such subscribers share a wake
	// every 3 ms at most with the default, while a batch committed after
	// a quiet spell still goes out at once. Zero means 30 µs, or none
	// when WakeSpacing is negative; a negative value means none.
	EncodedWakeSpacing time.Duration
	// Redactor masks secret values in every event before it is stored
	// or published (their data, in any JSON form), and holds back the end
	// of a delta that may begin one until the next delta (or another
	// event, or a second without one), so that a value streamed in
	// pieces is masked too. Nil masks nothing.
	Redactor *redact.Redactor
	// Committed, if set, is called by the writer goroutine with every
	// batch once it is durable and published, in commit order. It must
	// not block or call back into the journal; the session owner uses it
	// to learn that a run's terminal event is committed.
	Committed func(batch []event.Event)
	// AppendTook, if set, is called by the writer goroutine with how
	// long each store transaction took (failed ones too), for the host's
	// metrics. It must not block.
	AppendTook func(time.Duration)
}

// Journal owns one session's log. All methods are safe for concurrent use;
// appends are applied in the order the journal receives them. Close stops
// its goroutine and ends every subscription.
type Journal struct {
	cfg       Config
	sessionID string
	reqs      chan request
	quit      chan struct{}
	done      chan struct{} // closed when the writer has stopped for good (Close)
	closeOnce sync.Once
	// park asks the writer goroutine to stop until the next write (Park).
	park chan struct{}

	// run guards whether the writer goroutine runs: an idle journal's
	// owner parks it (Park), and the next write starts it again.
	run struct {
		sync.Mutex
		running bool
		senders int  // writes between enter and leave
		closed  bool // Close was called
	}
	// failed is cancelled when err is set: a context rather than a
	// channel, so that an owner can be called on a failure
	// (AfterFailure) without a goroutine of its own waiting for it.
	failed context.Context
	fail   context.CancelFunc

	// feed is the committed batches as subscribers read them.
	feed *feed

	mu   sync.Mutex // guards proj, err and last
	proj *record.Projection
	err  error // sticky write failure
	last int64 // seq of the last committed event
}

type request struct {
	events   []event.Event
	receipts []record.Receipt
	// delta is set for a coalescible delta instead of events.
	delta *delta
	done  chan result // nil for deltas
}

// delta is streamed text waiting to become one event.
type delta struct {
	runID string
	typ   event.Type
	step  int
	text  []byte
	// heldAt is when the text began to be only what sealing kept back
	// because it may begin a secret (Config.Redactor); zero when text
	// was added since.
	heldAt time.Time
}

type result struct {
	events []event.Event
	err    error
}

func (c *Config) defaults() {
	if c.CoalesceWindow <= 0 {
		c.CoalesceWindow = 50 * time.Millisecond
	}
	if c.CoalesceBytes <= 0 {
		c.CoalesceBytes = 16 << 10
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1024
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.EncodedWakeSpacing == 0 {
		c.EncodedWakeSpacing = 30 * time.Microsecond
		if c.WakeSpacing < 0 {
			c.EncodedWakeSpacing = -1
		}
	}
	if c.WakeSpacing == 0 {
		c.WakeSpacing = 10 * time.Microsecond
	}
}

// Create appends session.created for a new session with the given id,
// together with receipts, and returns its journal.
func Create(ctx context.Context, cfg Config, sessionID string, data event.SessionCreatedData, receipts ...record.Receipt) (*Journal, error) {
	cfg.defaults()
	j := newJournal(cfg, sessionID, record.NewProjection(record.Session{}, nil))
	e, err := event.New("", event.SessionCreated, data)
	if err != nil {
		j.Close()
		return nil, err
	}
	if _, err := j.AppendReceipts(ctx, receipts, e); err != nil {
		j.Close()
		return nil, fmt.Errorf("create session %s: %w", sessionID, err)
	}
	return j, nil
}

// Fork creates the journal of a new session that forks data.From at
// data.Seq: its first own event, session.forked, is written at
// data.Seq+1 (with receipts) and the store reads events 1..data.Seq
// through the source. Nothing of the source is copied.
func Fork(ctx context.Context, cfg Config, sessionID string, data event.SessionForkedData, receipts ...record.Receipt) (*Journal, error) {
	cfg.defaults()
	j := newJournal(cfg, sessionID, record.NewProjection(record.Session{LastSeq: data.Seq}, nil))
	e, err := event.New("", event.SessionForked, data)
	if err != nil {
		j.Close()
		return nil, err
	}
	if _, err := j.AppendReceipts(ctx, receipts, e); err != nil {
		j.Close()
		return nil, fmt.Errorf("fork session %s as %s: %w", data.From, sessionID, err)
	}
	return j, nil
}

// Open returns the journal of an existing session, loading its projection.
// The caller must be the session's only writer (see package lease).
func Open(ctx context.Context, cfg Config, sessionID string) (*Journal, error) {
	cfg.defaults()
	proj, err := load(ctx, cfg.Store, sessionID)
	if err != nil {
		return nil, err
	}
	return newJournal(cfg, sessionID, proj), nil
}

func load(ctx context.Context, st Store, sessionID string) (*record.Projection, error) {
	s, err := st.Session(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", sessionID, err)
	}
	// Only the runs that have not ended: the projection forgets ended runs
	// anyway (see record.Projection.Trim), and the session's history must
	// not make opening it slower.
	runs, err := st.Runs(ctx, store.ListRunsParams{SessionID: sessionID, Limit: 1 << 30,
		Statuses: []string{record.RunQueued, record.RunRunning, record.RunWaiting}})
	if err != nil {
		return nil, fmt.Errorf("open session %s: runs: %w", sessionID, err)
	}
	open, err := st.Requests(ctx, store.ListRequestsParams{SessionID: sessionID, Statuses: []string{record.RequestOpen}, Limit: 1 << 30})
	if err != nil {
		return nil, fmt.Errorf("open session %s: requests: %w", sessionID, err)
	}
	return record.NewProjection(s, runs, open...), nil
}

func newJournal(cfg Config, sessionID string, proj *record.Projection) *Journal {
	failed, fail := context.WithCancel(context.Background())
	j := &Journal{
		cfg:       cfg,
		sessionID: sessionID,
		reqs:      make(chan request, 16), // small: each loaded session holds one
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		park:      make(chan struct{}, 1),
		failed:    failed,
		fail:      fail,
		feed:      newFeed(proj.Session.LastSeq),
		proj:      proj,
		last:      proj.Session.LastSeq,
	}
	j.run.running = true
	go j.loop()
	return j
}

// enter starts a write: it starts the writer goroutine if it is parked,
// and keeps it from parking until leave. It reports false once the
// journal is closed.
func (j *Journal) enter() bool {
	j.run.Lock()
	defer j.run.Unlock()
	if j.run.closed {
		return false
	}
	j.run.senders++
	if !j.run.running {
		j.run.running = true
		go j.loop()
	}
	return true
}

// leave ends a write that enter started, once its request is in j.reqs
// (or was not sent).
func (j *Journal) leave() {
	j.run.Lock()
	j.run.senders--
	j.run.Unlock()
}

// Park stops the writer goroutine of an idle journal until its next
// write, so that an idle session holds no goroutine: the writer stops
// once it has nothing pending (no delta, no wake of the subscribers, no
// write on its way), and goes on otherwise. Its owner calls it when the
// session is idle; a write starts the writer again.
func (j *Journal) Park() {
	j.run.Lock()
	running := j.run.running && !j.run.closed
	j.run.Unlock()
	if running {
		select {
		case j.park <- struct{}{}:
		default:
		}
	}
}

// parked stops the writer if nothing is on its way to it, and reports
// whether it did. Called by the writer goroutine, with nothing pending.
func (j *Journal) parked() bool {
	j.run.Lock()
	defer j.run.Unlock()
	if j.run.closed || j.run.senders > 0 || len(j.reqs) > 0 {
		return false
	}
	j.run.running = false
	return true
}

// SessionID returns the session the journal writes.
func (j *Journal) SessionID() string { return j.sessionID }

// Session returns the session's projected record as of the last commit.
func (j *Journal) Session() record.Session {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.proj.Session
}

// Run returns a run's projected record as of the last commit. The
// projection holds every run that has not ended and the last few that
// have (keepEnded): for any other run it reports false, and the store has
// the record.
func (j *Journal) Run(id string) (record.Run, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.proj.Run(id)
}

// TrimEnded forgets the records of every run that ended and was written,
// as an owner does while its session is idle: [Journal.Run] reports
// false for them, and the store has their records.
func (j *Journal) TrimEnded() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.proj.Trim(0)
}

// OpenRequests returns the session's open requests as of the last
// commit, oldest first.
func (j *Journal) OpenRequests() []record.Request {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.proj.OpenRequests()
}

// LastSeq returns the seq of the last committed event.
func (j *Journal) LastSeq() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// Failed returns a channel that is closed when a write fails. A failed
// journal refuses every later write with that failure (see [Journal.Err]);
// its projection is what the store holds. The owner recovers by opening a
// new journal once the store accepts writes again.
func (j *Journal) Failed() <-chan struct{} { return j.failed.Done() }

// AfterFailure arranges for f to be called in a goroutine of its own
// once a write fails, at once if one has, as [context.AfterFunc] does:
// an owner learns of the failure without a goroutine waiting for it. f
// must return promptly (it may start the owner's own goroutine). stop
// unregisters f and reports whether it did so before f was called.
func (j *Journal) AfterFailure(f func()) (stop func() bool) {
	return context.AfterFunc(j.failed, f)
}

// Err returns the write failure that stopped the journal, if any.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Append commits events (SessionID, Seq and Time are assigned) after any
// pending delta, and returns them as stored. It returns once they are
// durable. Concurrent appends share transactions.
func (j *Journal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	r := request{events: events, done: make(chan result, 1)}
	return j.send(ctx, r)
}

// AppendReceipts is Append that also stores idempotency receipts in the
// same transaction as the events, so a mutation and its receipt are durable
// together or not at all.
func (j *Journal) AppendReceipts(ctx context.Context, receipts []record.Receipt, events ...event.Event) ([]event.Event, error) {
	r := request{events: events, receipts: receipts, done: make(chan result, 1)}
	return j.send(ctx, r)
}

// Flush returns once every delta handed to the journal before it is durable.
func (j *Journal) Flush(ctx context.Context) error {
	_, err := j.send(ctx, request{done: make(chan result, 1)})
	return err
}

func (j *Journal) send(ctx context.Context, r request) ([]event.Event, error) {
	if err := j.Err(); err != nil {
		return nil, err
	}
	if !j.enter() {
		return nil, ErrClosed
	}
	select {
	case j.reqs <- r:
		j.leave()
	case <-j.quit:
		j.leave()
		return nil, ErrClosed
	case <-ctx.Done():
		j.leave()
		return nil, ctx.Err()
	}
	// Once the writer has the request, its answer is the truth: a caller
	// whose ctx ends now must not take an append that may still commit for
	// one that did not (a cancelled run would then leave its tool calls
	// started and never completed). The wait is one commit, bounded by the
	// store's timeout.
	select {
	case res := <-r.done:
		return res.events, res.err
	case <-j.done:
		// The writer has stopped; it may have answered first.
		select {
		case res := <-r.done:
			return res.events, res.err
		default:
			return nil, ErrClosed
		}
	}
}

// Delta hands streamed text to the journal. Consecutive deltas of the same
// run, type and step are coalesced into one event of at most
// Config.CoalesceBytes, committed within Config.CoalesceWindow; no text is
// dropped. Delta returns before the text is durable (see Flush).
func (j *Journal) Delta(ctx context.Context, runID string, t event.Type, step int, text string) error {
	if text == "" {
		return nil
	}
	if err := j.Err(); err != nil {
		return err
	}
	if !j.enter() {
		return ErrClosed
	}
	defer j.leave()
	select {
	case j.reqs <- request{delta: &delta{runID: runID, typ: t, step: step, text: []byte(text)}}:
		return nil
	case <-j.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the writer after committing what it was handed, and ends
// every subscription. It is safe to call more than once.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.run.Lock()
		j.run.closed = true
		if !j.run.running { // parked: the writer ends the subscriptions
			j.run.running = true
			go j.loop()
		}
		j.run.Unlock()
		close(j.quit)
	})
	<-j.done
	return nil
}
