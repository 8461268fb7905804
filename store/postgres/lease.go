package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"weft.dev/weft/store"
)

// LeaseConfig configures [NewLeases]. The zero value of every field but
// Holder selects the default.
type LeaseConfig struct {
	// Holder names the host in the leases table (and so in `weft nodes`
	// and in the errors of other hosts). Required, and unique to one
	// process: two processes with one name would take each other's
	// leases. cmd/weft uses hostname/pid/random.
	Holder string
	// TTL is how long a lease lives without a renewal, by the database's
	// clock; the holder renews its leases every TTL/3. A host that dies
	// keeps its sessions from every other host for at most TTL. Zero
	// means 10s.
	TTL time.Duration
	// Logger receives failed renewals and lost leases. Nil means silent.
	Logger *slog.Logger
}

// Leases is a [store.Leases] of rows in the database's leases table: the
// leases of one holder (a host), renewed together by one goroutine. Create
// it with [NewLeases] and stop it with [Leases.Close]. Its methods are
// safe for concurrent use.
//
// A lease is a row (session, holder, epoch, expires_at). Acquire inserts
// it, or takes over a row that expired (or that this holder left) with
// epoch + 1, in one statement that also takes the session's advisory
// lock, the lock every [Store.Append] holds while it checks its batch's
// epoch against the row: a take-over waits for the appends in flight, and
// every append after it sees the new epoch, so an append commits only
// under the current epoch and a holder that lost its lease never writes
// again ([store.ErrFenced]).
//
// Time is the database's for expiry (hosts' clocks may differ) and the
// holder's monotonic clock for its own view: a lease counts as lost once
// TTL has passed since the start of its last successful renewal (or of
// its acquisition), which is never later than the database's expiry.
// A renewal that finds the row moved on (another epoch) or cannot renew
// before that deadline closes the lease's Lost channel. A failed renewal
// is retried every TTL/10 until the deadline, so a database that restarts
// within the TTL costs no lease.
type Leases struct {
	t      leaseTable
	holder string
	ttl    time.Duration
	logger *slog.Logger

	ctx  context.Context // cancelled by Close; the renewals' parent
	stop context.CancelFunc
	done chan struct{} // closed when the renewal goroutine has exited

	mu     sync.Mutex
	held   map[string]*lease // by session ID
	closed bool
}

// lease is one held lease. Its deadline and whether it is held are its
// Leases' (under its mu).
type lease struct {
	ls       *Leases
	id       string
	epoch    int64
	lost     chan struct{}
	deadline time.Time // guarded by ls.mu: lost once passed without a renewal
	release  sync.Once
	err      error // of the release
}

// leaseTable is where leases live: the database, or a table in memory
// for the tests of the renewal logic.
type leaseTable interface {
	// acquire inserts or takes over session id's row for holder with a
	// TTL of ttl and returns its epoch, or 0 and the live holder's name.
	acquire(ctx context.Context, id, holder string, ttl time.Duration) (epoch int64, heldBy string, err error)
	// renew extends holder's rows among ids (with their epochs) by ttl
	// and returns the IDs it extended.
	renew(ctx context.Context, holder string, ttl time.Duration, ids []string, epochs []int64) ([]string, error)
	// release expires session id's row if it still has epoch.
	release(ctx context.Context, id string, epoch int64) error
	// close releases what the table holds (a connection).
	close()
}

// NewLeases returns the leases of cfg.Holder on st's database and starts
// the goroutine that renews them; [Leases.Close] stops it. The database
// needs schema version 3 (the leases table).
//
// The renewals have a connection of their own, outside st's pool (a
// second pool of one connection, reconnected as the pool is): a pool
// whose every connection waits (for a lock, a slow statement, a frozen
// peer's transaction) must not make a live host lose its leases. A
// renewal takes no lock that an append holds, so it never waits behind
// one either. Acquire and Release use st's pool: they wait for the
// appends in flight, which a renewal must not.
func NewLeases(st *Store, cfg LeaseConfig) (*Leases, error) {
	pcfg := st.pool.Config()
	pcfg.MaxConns, pcfg.MinConns = 1, 0
	renewals, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, st.errorf("lease renewals", err)
	}
	l, err := newLeases(pgLeases{s: st, renewals: renewals}, cfg)
	if err != nil {
		renewals.Close()
	}
	return l, err
}

func newLeases(t leaseTable, cfg LeaseConfig) (*Leases, error) {
	if cfg.Holder == "" {
		return nil, errors.New("postgres leases: LeaseConfig.Holder is empty")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.TTL < 3*time.Millisecond {
		return nil, fmt.Errorf("postgres leases: LeaseConfig.TTL %v is too short", cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	l := &Leases{t: t, holder: cfg.Holder, ttl: cfg.TTL, logger: cfg.Logger, ctx: ctx, stop: stop,
		done: make(chan struct{}), held: map[string]*lease{}}
	go l.loop()
	return l, nil
}

// Holder returns the name the leases are held under.
func (l *Leases) Holder() string { return l.holder }

// TTL returns the leases' time to live.
func (l *Leases) TTL() time.Duration { return l.ttl }

// Acquire implements [store.Leases]: it takes session id's lease, a new
// row with epoch 1 or the session's expired row (or one this holder
// left, as after an unload whose release failed) with its epoch + 1. A
// lease a live holder has fails at once with a [*store.LeaseHeldError]
// naming it. A lease this holder already had is lost (its Lost channel
// closes), since its epoch is no longer the session's.
func (l *Leases) Acquire(ctx context.Context, sessionID string) (store.Lease, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, errors.New("postgres leases: closed")
	}
	start := time.Now()
	epoch, heldBy, err := l.t.acquire(ctx, sessionID, l.holder, l.ttl)
	if err != nil {
		return nil, err
	}
	if epoch == 0 {
		if heldBy == "" {
			heldBy = "another host"
		}
		return nil, &store.LeaseHeldError{SessionID: sessionID, Holder: heldBy}
	}
	ls := &lease{ls: l, id: sessionID, epoch: epoch, lost: make(chan struct{}), deadline: start.Add(l.ttl)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ls.Release(context.WithoutCancel(ctx))
		return nil, errors.New("postgres leases: closed")
	}
	if old := l.held[sessionID]; old != nil {
		l.loseLocked(old, "taken over by this holder again")
	}
	l.held[sessionID] = ls
	l.mu.Unlock()
	return ls, nil
}

// Close stops renewing. Leases still held are lost (their Lost channels
// close) and expire in the database within the TTL; release them first
// to hand them over at once. It is safe to call more than once.
func (l *Leases) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stop()
	<-l.done
	l.mu.Lock()
	for _, ls := range l.held {
		l.loseLocked(ls, "the holder closed")
	}
	l.mu.Unlock()
	l.t.close()
	return nil
}

// loop renews the leases every TTL/3, sooner after a failure, until
// Close.
func (l *Leases) loop() {
	defer close(l.done)
	t := time.NewTimer(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(l.renew())
	}
}

// renew renews every held lease in one statement and returns how long to
// wait before the next renewal.
func (l *Leases) renew() time.Duration {
	every, retry := l.ttl/3, max(l.ttl/10, time.Millisecond)
	start := time.Now()
	l.mu.Lock()
	var batch []*lease
	for _, ls := range l.held {
		if !start.Before(ls.deadline) {
			l.loseLocked(ls, "its renewals failed until it expired")
			continue
		}
		batch = append(batch, ls)
	}
	l.mu.Unlock()
	if len(batch) == 0 {
		return every
	}
	slices.SortFunc(batch, func(a, b *lease) int { return strings.Compare(a.id, b.id) })
	ids, epochs := make([]string, len(batch)), make([]int64, len(batch))
	first := batch[0].deadline
	for i, ls := range batch {
		ids[i], epochs[i] = ls.id, ls.epoch
		if ls.deadline.Before(first) {
			first = ls.deadline
		}
	}
	// A renewal that ends after the first deadline is too late for it;
	// one that hangs (a dead connection) is given up and retried.
	if start.Add(every).Before(first) {
		first = start.Add(every)
	}
	ctx, cancel := context.WithDeadline(l.ctx, first)
	renewed, err := l.t.renew(ctx, l.holder, l.ttl, ids, epochs)
	cancel()
	if l.ctx.Err() != nil {
		return every
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.logger.Warn("renew session leases", "holder", l.holder, "leases", len(batch), "err", err)
		now := time.Now()
		next := retry
		for _, ls := range batch {
			if l.held[ls.id] != ls {
				continue
			}
			if !now.Before(ls.deadline) {
				l.loseLocked(ls, fmt.Sprintf("its renewals failed until it expired (%v)", err))
			} else {
				next = min(next, ls.deadline.Sub(now))
			}
		}
		return next
	}
	ok := make(map[string]bool, len(renewed))
	for _, id := range renewed {
		ok[id] = true
	}
	for _, ls := range batch {
		if l.held[ls.id] != ls {
			continue // released meanwhile
		}
		if ok[ls.id] {
			ls.deadline = start.Add(l.ttl)
		} else {
			l.loseLocked(ls, "its row moved on: another holder took the session over")
		}
	}
	return every
}

// loseLocked forgets ls and closes its Lost channel. Called with l.mu
// held.
func (l *Leases) loseLocked(ls *lease, why string) {
	if l.held[ls.id] != ls {
		return
	}
	delete(l.held, ls.id)
	close(ls.lost)
	l.logger.Warn("session lease lost", "session", ls.id, "epoch", ls.epoch, "holder", l.holder, "why", why)
}

func (ls *lease) Epoch() int64          { return ls.epoch }
func (ls *lease) Holder() string        { return ls.ls.holder }
func (ls *lease) Lost() <-chan struct{} { return ls.lost }

// Release stops renewing the lease and expires its row, if the row still
// has its epoch, so that another holder can take the session at once.
func (ls *lease) Release(ctx context.Context) error {
	ls.release.Do(func() {
		l := ls.ls
		l.mu.Lock()
		if l.held[ls.id] == ls {
			delete(l.held, ls.id)
		}
		l.mu.Unlock()
		ls.err = l.t.release(ctx, ls.id, ls.epoch)
	})
	return ls.err
}

// pgLeases is the leases table of a Store's database: renewals go
// through a pool of their own.
type pgLeases struct {
	s        *Store
	renewals *pgxpool.Pool
}

func (p pgLeases) close() { p.renewals.Close() }

// The statements of the leases. Intervals are microseconds ($N *
// interval '1 microsecond'), the database's resolution.
const (
	// acquireLease inserts the row, or takes over one that expired or
	// that this holder left, with epoch + 1, under the session's advisory
	// lock (the appends' lock: see Leases). When a live holder keeps the
	// row, it returns no epoch and that holder (as of the statement's
	// start).
	acquireLease = `WITH up AS (
		INSERT INTO leases AS l (session_id, holder, epoch, acquired_at, expires_at)
		SELECT $1::text, $2::text, 1, now(), now() + $3::bigint * interval '1 microsecond'
		FROM (SELECT pg_advisory_xact_lock($4, hashtext($1::text))) AS fence
		ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, epoch = l.epoch + 1,
			acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
		WHERE l.expires_at <= now() OR l.holder = excluded.holder
		RETURNING l.epoch
	)
	SELECT (SELECT epoch FROM up), (SELECT holder FROM leases WHERE session_id = $1::text)`
	renewLeases = `UPDATE leases AS l SET expires_at = now() + $2::bigint * interval '1 microsecond'
		FROM unnest($3::text[], $4::bigint[]) AS h (session_id, epoch)
		WHERE l.session_id = h.session_id AND l.epoch = h.epoch AND l.holder = $1
		RETURNING l.session_id`
	releaseLease = `UPDATE leases SET expires_at = now() WHERE session_id = $1 AND epoch = $2 AND expires_at > now()`
)

func (p pgLeases) acquire(ctx context.Context, id, holder string, ttl time.Duration) (int64, string, error) {
	s := p.s
	if err := s.guard.Enter(); err != nil {
		return 0, "", err
	}
	defer s.guard.Leave()
	var epoch *int64
	var heldBy *string
	if err := s.pool.QueryRow(ctx, acquireLease, id, holder, ttl.Microseconds(), lockSession).Scan(&epoch, &heldBy); err != nil {
		return 0, "", s.errorf("lease session "+id, err)
	}
	if epoch != nil {
		return *epoch, "", nil
	}
	if heldBy == nil {
		return 0, "", nil
	}
	return 0, *heldBy, nil
}

func (p pgLeases) renew(ctx context.Context, holder string, ttl time.Duration, ids []string, epochs []int64) ([]string, error) {
	s := p.s
	if err := s.guard.Enter(); err != nil {
		return nil, err
	}
	defer s.guard.Leave()
	rows, err := p.renewals.Query(ctx, renewLeases, holder, ttl.Microseconds(), ids, epochs)
	if err != nil {
		return nil, s.errorf("renew leases", err)
	}
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, s.errorf("renew leases", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("renew leases", err)
	}
	return out, nil
}

func (p pgLeases) release(ctx context.Context, id string, epoch int64) error {
	s := p.s
	if err := s.guard.Enter(); err != nil {
		return err
	}
	defer s.guard.Leave()
	if _, err := s.pool.Exec(ctx, releaseLease, id, epoch); err != nil {
		return s.errorf("release the lease of session "+id, err)
	}
	return nil
}

// LeaseInfo is one row of the leases table.
type LeaseInfo struct {
	SessionID string
	Holder    string
	Epoch     int64
	// Age is how long the holder has had the lease, by the database's
	// clock.
	Age time.Duration
	// ExpiresIn is how long the lease lives without a renewal (negative
	// once expired).
	ExpiresIn time.Duration
}

// ListLeasesParams selects rows of the leases table.
type ListLeasesParams struct {
	// Expired lists expired (and released) leases too.
	Expired bool
	// Limit caps the list; zero or negative means 10000.
	Limit int
}

// ListLeases lists the session leases, live ones only unless p.Expired,
// by holder then age (oldest first).
// HolderLive reports whether holder has a live session lease: one query,
// whatever the number of leases in the store.
func (s *Store) HolderLive(ctx context.Context, holder string) (bool, error) {
	if err := s.guard.Enter(); err != nil {
		return false, err
	}
	defer s.guard.Leave()
	var live bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM leases WHERE holder = $1 AND expires_at > now())`, holder).Scan(&live); err != nil {
		return false, s.errorf("check the leases of "+holder, err)
	}
	return live, nil
}

func (s *Store) ListLeases(ctx context.Context, p ListLeasesParams) ([]LeaseInfo, error) {
	if err := s.guard.Enter(); err != nil {
		return nil, err
	}
	defer s.guard.Leave()
	q := `SELECT session_id, holder, epoch,
		(extract(epoch FROM now() - acquired_at) * 1e6)::bigint,
		(extract(epoch FROM expires_at - now()) * 1e6)::bigint
		FROM leases`
	if !p.Expired {
		q += ` WHERE expires_at > now()`
	}
	q += ` ORDER BY holder, acquired_at, session_id LIMIT $1`
	limit := p.Limit
	if limit <= 0 {
		limit = 10000
	}
	rows, err := s.pool.Query(ctx, q, limit)
	if err != nil {
		return nil, s.errorf("list leases", err)
	}
	defer rows.Close()
	var out []LeaseInfo
	for rows.Next() {
		var li LeaseInfo
		var age, left int64
		if err := rows.Scan(&li.SessionID, &li.Holder, &li.Epoch, &age, &left); err != nil {
			return nil, s.errorf("list leases", err)
		}
		li.Age, li.ExpiresIn = time.Duration(age)*time.Microsecond, time.Duration(left)*time.Microsecond
		out = append(out, li)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list leases", err)
	}
	return out, nil
}

// Fenced reports true: every lease has a fencing epoch that the store
// checks on each write (see [store.HostLeases]).
func (l *Leases) Fenced() bool { return true }

var _ store.LeaseProvider = (*Store)(nil)

// HostLeases implements [store.LeaseProvider]: the [Leases] of a holder
// named HOSTNAME/PID/RANDOM (p.Name), unique to the process, so that a
// restarted host does not take the leases of the process it replaces for
// its own (they expire first) and `weft nodes` tells processes apart;
// their TTL is [Config.LeaseTTL]. Any number of hosts may hold leases on
// one database; p.Shared changes nothing.
func (s *Store) HostLeases(_ context.Context, p store.HostLeaseParams) (store.HostLeases, error) {
	return NewLeases(s, LeaseConfig{Holder: HolderName(p.Name), TTL: s.leaseTTL, Logger: p.Logger})
}

// HolderName names this process as a lease holder: HOSTNAME/PID/RANDOM,
// then " (what)" when what is set.
func HolderName(what string) string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "unknown"
	}
	var r [4]byte
	rand.Read(r[:])
	name += "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(r[:])
	if what != "" {
		name += " (" + what + ")"
	}
	return name
}

var _ store.OrphanFinder = (*Store)(nil)

// orphanedSessions lists the sessions with a running process and no live
// lease (processes_by_status, then the leases' and sessions' primary
// keys).
const orphanedSessions = `SELECT DISTINCT p.session_id FROM processes p
	JOIN sessions s ON s.id = p.session_id AND NOT s.deleted
	WHERE p.status = 'running'
	AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.session_id = p.session_id AND l.expires_at > now())
	LIMIT $1`

// OrphanedSessions implements [store.OrphanFinder]: the sessions, up to
// limit, that have a running process while no live holder has their
// lease, by the database's clock.
func (s *Store) OrphanedSessions(ctx context.Context, limit int) ([]string, error) {
	if err := s.guard.Enter(); err != nil {
		return nil, err
	}
	defer s.guard.Leave()
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.pool.Query(ctx, orphanedSessions, limit)
	if err != nil {
		return nil, s.errorf("list orphaned sessions", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.errorf("list orphaned sessions", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list orphaned sessions", err)
	}
	return out, nil
}
