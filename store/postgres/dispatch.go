package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// dispatchQueue is the River queue of weft's wake-up jobs.
const dispatchQueue = "weft"

// wakeArgs is a River job's arguments: a wake-up for run RunID of session
// SessionID, inserted with the run's run.queued event. It is unique by
// run: a run has at most one job however often its batch is retried.
type wakeArgs struct {
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId" river:"unique"`
}

// Kind implements river.JobArgs.
func (wakeArgs) Kind() string { return "weft_wake" }

// InsertOpts implements river.JobArgsWithInsertOpts: weft's queue, unique
// by run ID in every state River keeps (a completed job keeps its run
// from a second job until River's cleaner deletes it, a day later), and
// attempts enough for a long database outage (a wake-up that cannot
// reach the store fails and is retried; a snooze costs no attempt).
func (wakeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: dispatchQueue, MaxAttempts: 1000, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// wakeJobs returns the wake-up jobs of a batch: one per run.queued.
func wakeJobs(b store.Batch) []river.InsertManyParams {
	var out []river.InsertManyParams
	for _, e := range b.Events {
		if e.Type == event.RunQueued && e.RunID != "" {
			out = append(out, river.InsertManyParams{Args: wakeArgs{SessionID: b.SessionID, RunID: e.RunID}})
		}
	}
	return out
}

// newInserter returns the insert-only River client with which appends
// insert their wake-up jobs in their own transactions.
func newInserter(logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	c, err := river.NewClient(riverpgxv5.New(nil), &river.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("postgres store: River: %w", err)
	}
	return c, nil
}

// Waker is what a [Dispatcher]'s jobs call: the host's side of run
// dispatch. Wake makes sure a live host owns session sessionID and runs
// its queue: it takes the session's lease (loading it, which closes what
// a dead owner left and starts its queued runs in order) unless it or
// another live host holds it. It reports done once run runID needs no
// more waking (it ended, or it and its session are gone); otherwise the
// job looks again later, so that a run whose owner dies is taken over by
// whichever host looks first after the lease expires. It must return
// within the job's timeout (a minute) and never wait for the run.
type Waker interface {
	Wake(ctx context.Context, sessionID, runID string) (done bool, err error)
}

// DispatchConfig configures [NewDispatcher]. The zero value of every field
// but Waker selects the default.
type DispatchConfig struct {
	// Waker does the jobs' work. Required.
	Waker Waker
	// ID names this host to River (its client ID, shown as River's leader
	// by `weft nodes`). Empty means River's default (host name and time).
	ID string
	// Recheck is how long a job waits before it looks again at a run that
	// is not done: the most a takeover waits beyond a dead owner's lease
	// TTL. Zero means 1s.
	Recheck time.Duration
	// PollInterval is how often the host looks for jobs that are due
	// besides the notifications of new ones (a snoozed job is due without
	// one). Zero means 1s.
	PollInterval time.Duration
	// Workers is how many jobs the host works at once. Zero means 8.
	Workers int
	// MaxConns caps the dispatcher's own connection pool (River's fetches,
	// its LISTEN connection, its leader election and maintenance), apart
	// from the store's so that neither starves the other. Zero means 4.
	MaxConns int
	// Logger receives River's diagnostics. Nil means silent.
	Logger *slog.Logger
}

// Dispatcher works the wake-up jobs of queued runs on one host: a River
// client on the store's database, with a pool of its own. Every append
// with a run.queued event inserts a job (unique by run) in its
// transaction, so a run that is acknowledged has a job, and a job exists
// only for a run that was acknowledged. The lease row and its fencing
// epoch decide who runs a session, never the job: a job is a short,
// idempotent wake-up ([Waker]) that snoozes while its run is not done;
// its timeout is 30 s, and River's rescuer makes a job that a dead host
// was working available again a minute later.
// Create it with [NewDispatcher], start it with [Dispatcher.Start] and
// stop it with [Dispatcher.Close]. Its methods are safe for concurrent
// use.
type Dispatcher struct {
	st     *Store
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	name   string
}

// NewDispatcher returns a dispatcher of st's database. The database needs
// schema version 6 (River's tables).
func NewDispatcher(st *Store, cfg DispatchConfig) (*Dispatcher, error) {
	if cfg.Waker == nil {
		return nil, errors.New("postgres dispatcher: DispatchConfig.Waker is nil")
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pcfg := st.pool.Config().Copy()
	pcfg.MaxConns = int32(cfg.MaxConns)
	pcfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, classify(st.name, "dispatcher", err)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &wakeWorker{w: cfg.Waker, recheck: cfg.Recheck, logger: cfg.Logger}); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres dispatcher: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:                cfg.ID,
		Logger:            cfg.Logger,
		Queues:            map[string]river.QueueConfig{dispatchQueue: {MaxWorkers: cfg.Workers}},
		Workers:           workers,
		FetchPollInterval: cfg.PollInterval,
		FetchCooldown:     min(river.FetchCooldownDefault, cfg.PollInterval),
		// A wake-up takes milliseconds; a job a killed host was working
		// is taken back a minute later (the other jobs of its session
		// wake a host meanwhile).
		JobTimeout:           30 * time.Second,
		RescueStuckJobsAfter: time.Minute,
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres dispatcher: %w", err)
	}
	return &Dispatcher{st: st, pool: pool, client: client, name: st.name}, nil
}

// Start starts working jobs. ctx bounds the start only.
func (d *Dispatcher) Start(ctx context.Context) error {
	if err := d.client.Start(context.WithoutCancel(ctx)); err != nil {
		return classify(d.name, "start the dispatcher", err)
	}
	return nil
}

// Close stops taking jobs, waits up to ten seconds for those in flight
// (they are short), cancels what is left, and closes the dispatcher's
// pool. A job cut short is worked again (by River's rescuer, or at once
// when another host snoozed it meanwhile); the lease keeps a run from
// running twice. It is safe to call more than once.
func (d *Dispatcher) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.client.Stop(ctx)
	if err != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		d.client.StopAndCancel(cctx)
		ccancel()
	}
	d.pool.Close()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("postgres dispatcher: jobs still running at close: %w", err)
	}
	return nil
}

// handoverSQL makes the wake-up jobs of the sessions whose leases holder
// last held due at once: a snoozed job is available with a later
// scheduled_at (a short snooze) or scheduled (a long one).
const handoverSQL = `UPDATE river_job AS j SET scheduled_at = now(), state = 'available'
	FROM leases AS l
	WHERE l.holder = $1 AND l.expires_at <= now() AND j.kind = $2 AND j.state IN ('available', 'scheduled')
		AND j.args->>'sessionId' = l.session_id`

// Handover makes due at once the jobs of the sessions holder released
// (their lease rows expired, still naming holder): a host that shuts
// down calls it once its sessions have closed and released their leases,
// so that the other hosts take its queued runs at their next poll
// (DispatchConfig.PollInterval) instead of at their jobs' next recheck.
// It uses the store's pool (the dispatcher may be closed already) and
// returns how many jobs it hastened.
func (d *Dispatcher) Handover(ctx context.Context, holder string) (int, error) {
	if err := d.st.guard.Enter(); err != nil {
		return 0, err
	}
	defer d.st.guard.Leave()
	tag, err := d.st.pool.Exec(ctx, handoverSQL, holder, wakeArgs{}.Kind())
	if err != nil {
		return 0, d.st.errorf("hand the queued runs over", err)
	}
	return int(tag.RowsAffected()), nil
}

// wakeWorker works wake-up jobs through a Waker.
type wakeWorker struct {
	river.WorkerDefaults[wakeArgs]
	w       Waker
	recheck time.Duration
	logger  *slog.Logger
}

// Work wakes the job's session: done completes the job; a run that is
// not done, or a wake-up that failed (a store outage), snoozes it for
// Recheck, which costs no attempt.
func (w *wakeWorker) Work(ctx context.Context, job *river.Job[wakeArgs]) error {
	done, err := w.w.Wake(ctx, job.Args.SessionID, job.Args.RunID)
	if err != nil {
		if ctx.Err() != nil {
			return err // the client stops: the job is retried
		}
		w.logger.Warn("wake a session for its run; retrying", "session", job.Args.SessionID, "run", job.Args.RunID, "err", err)
		return river.JobSnooze(w.recheck)
	}
	if done {
		return nil
	}
	return river.JobSnooze(w.recheck)
}

// DispatchState is what [Store.DispatchState] reports of run dispatch.
type DispatchState struct {
	// Queued counts the queued runs by the live holder of their
	// session's lease; "" counts those of sessions no live host holds
	// (their jobs wake a host).
	Queued map[string]int
	// Jobs counts the wake-up jobs in River by state (available,
	// running, scheduled, retryable, completed, discarded, …).
	Jobs map[string]int
	// Leader is the River client elected leader (it runs River's
	// maintenance: rescuing stuck jobs, deleting old ones): a host's
	// holder name, or "" while none is.
	Leader string
}

// DispatchState reads the queue depth of each host and the state of
// River's jobs, for `weft nodes`.
func (s *Store) DispatchState(ctx context.Context) (DispatchState, error) {
	if err := s.guard.Enter(); err != nil {
		return DispatchState{}, err
	}
	defer s.guard.Leave()
	st := DispatchState{Queued: map[string]int{}, Jobs: map[string]int{}}
	count := func(op, q string, into map[string]int, args ...any) error {
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return s.errorf(op, err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				return s.errorf(op, err)
			}
			into[k] = n
		}
		if err := rows.Err(); err != nil {
			return s.errorf(op, err)
		}
		return nil
	}
	if err := count("count queued runs", `SELECT coalesce(l.holder, ''), count(*) FROM runs r
		LEFT JOIN leases l ON l.session_id = r.session_id AND l.expires_at > now()
		WHERE r.status = 'queued' GROUP BY 1`, st.Queued); err != nil {
		return st, err
	}
	if err := count("count River's jobs", `SELECT state::text, count(*) FROM river_job WHERE kind = $1 GROUP BY 1`, st.Jobs, wakeArgs{}.Kind()); err != nil {
		return st, err
	}
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT leader_id FROM river_leader WHERE expires_at > now() ORDER BY elected_at DESC LIMIT 1), '')`).Scan(&st.Leader)
	if err != nil {
		return st, s.errorf("read River's leader", err)
	}
	return st, nil
}
