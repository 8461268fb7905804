package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"weft.dev/weft/store/record"
)

// Purge errors that callers branch on with errors.Is.
var (
	// ErrInUse reports a purge of a session that still has work: a run
	// that is queued, running or waiting, a background process it owns
	// that is running, or (a store shared by hosts) a live lease another
	// host holds. Nothing is removed; the purge may succeed later.
	ErrInUse = errors.New("session in use")
	// ErrForkSource reports a purge of a session that is the source of a
	// fork that is not itself purged: the fork reads its first events
	// through the source's rows (see [ReadFork]), so the source must
	// outlive it. Nothing is removed; purge the forks first.
	ErrForkSource = errors.New("session is the source of a fork")
)

// Purger removes ended sessions from a store, whole: the other end of a
// session's life, which [SessionLog] never has (deleting a session only
// appends a tombstone, session.deleted, and its log stays). A retention
// policy (the host's) purges through it. Every store of weft implements
// it; a consumer finds it by type assertion, as it is optional to the
// contract. Its methods are safe for concurrent use.
type Purger interface {
	// Purge removes session id and everything that is its own, in one
	// transaction: its events, its session, run and request records, its
	// receipts, snapshots and fork row, and the processes it owns with
	// their logs. Afterwards the store answers for it, its runs and its
	// processes as for IDs it never had ([ErrNotFound]), and a fork of a
	// purged session cannot be created (the source is gone).
	//
	// Purge refuses, removing nothing, a session with work left
	// ([ErrInUse]) and the source of a fork that is not purged itself
	// ([ErrForkSource]); an unknown session is [ErrNotFound]. It must not
	// race appends to the session by its owner: the caller stops the
	// owner first (a host unloads the session), and an append that still
	// comes after the purge finds an empty log and is refused
	// ([ErrSeqConflict]) unless it starts a new session at seq 1.
	Purge(ctx context.Context, sessionID string) error
	// LockRetention takes the store's retention lock, which keeps a
	// second retention pass (another host's, or another process's on the
	// same store) from running at the same time, and returns the function
	// that releases it. It does not wait: when another holder has the
	// lock it fails at once with an error wrapping [ErrLeaseHeld]. A lock
	// whose holder dies is released with it (PostgreSQL: with its
	// connection).
	LockRetention(ctx context.Context) (unlock func(), err error)
}

// Retention says which ended sessions a retention pass purges. A session
// is ended when its record names no active run (the store refuses the
// purge of one with a running process or, shared by hosts, a live lease
// elsewhere, which [Candidates] cannot see). The zero Retention purges
// nothing.
type Retention struct {
	// MaxAge, if positive, purges a session whose last event is older.
	MaxAge time.Duration
	// MaxSessions, if positive, keeps the newest MaxSessions sessions
	// that are not deleted (newest by creation, as [SessionLog.Sessions]
	// lists them) and purges the older ones.
	MaxSessions int
	// DeletedAfter, if positive, purges a deleted session (its last
	// event is its session.deleted) once it has been deleted this long.
	// Deleted sessions never count towards MaxSessions.
	DeletedAfter time.Duration
}

// IsZero reports whether r purges nothing.
func (r Retention) IsZero() bool {
	return r.MaxAge <= 0 && r.MaxSessions <= 0 && r.DeletedAfter <= 0
}

// Why a [Candidate] is to be purged.
const (
	ReasonAge     = "age"     // its last event is older than MaxAge
	ReasonCount   = "count"   // it is beyond the newest MaxSessions
	ReasonDeleted = "deleted" // deleted longer than DeletedAfter ago
)

// Candidate is a session a retention policy would purge, and why (one
// of the Reason* constants).
type Candidate struct {
	Session record.Session
	Reason  string
}

// CandidatesParams configure [Candidates].
type CandidatesParams struct {
	Retention
	// Now is the time ages are measured from.
	Now time.Time
	// PageSize is how many session records are read at a time; zero
	// means 200. The listing holds two pages in memory.
	PageSize int
}

// Candidates lists the sessions of log that p's retention would purge,
// newest first, reading the sessions page by page, so that its memory is
// bounded whatever the store holds. A fork is newer than its source, so
// it is listed (and, by a caller that purges as it goes, purged) before
// its source. The caller may purge each candidate as it gets it: the
// listing reads a page ahead (two pages in memory). A listing always
// starts from the newest session, which MaxSessions counts from; a caller
// that stops early lists again, and what it purged is gone. A candidate
// the caller does not purge after all (the store refused it) does not
// change the count of the sessions after it: they are beyond the newest
// MaxSessions all the same.
//
// The iterator is single-use; an error of the store ends it.
func Candidates(ctx context.Context, log SessionLog, p CandidatesParams) iter.Seq2[Candidate, error] {
	return func(yield func(Candidate, error) bool) {
		if p.IsZero() {
			return
		}
		size := p.PageSize
		if size <= 0 {
			size = 200
		}
		list := func(before string) ([]record.Session, error) {
			page, err := log.Sessions(ctx, ListSessionsParams{Before: before, Limit: size, IncludeDeleted: true})
			if err != nil {
				return nil, fmt.Errorf("list sessions for retention: %w", err)
			}
			return page, nil
		}
		kept := 0
		page, err := list("")
		for err == nil && len(page) > 0 {
			// The next page is read before this one's candidates are
			// yielded: a caller that purges them may purge the session
			// the next page is read after.
			var next []record.Session
			if len(page) == size {
				if next, err = list(page[len(page)-1].ID); err != nil {
					break
				}
			}
			for _, s := range page {
				if reason := p.reason(s, &kept); reason != "" {
					if !yield(Candidate{Session: s, Reason: reason}, nil) {
						return
					}
				}
			}
			page = next
		}
		if err != nil {
			yield(Candidate{}, err)
		}
	}
}

// reason says why p's retention purges s, or "" if it keeps s, counting
// a session it keeps that is not deleted in kept.
func (p *CandidatesParams) reason(s record.Session, kept *int) string {
	if s.ActiveRunID != "" {
		if !s.Deleted {
			*kept++
		}
		return ""
	}
	last := s.UpdatedAt
	if last.IsZero() {
		last = s.CreatedAt
	}
	switch {
	case s.Deleted && p.DeletedAfter > 0 && p.Now.Sub(last) >= p.DeletedAfter:
		return ReasonDeleted
	case p.MaxAge > 0 && p.Now.Sub(last) >= p.MaxAge:
		return ReasonAge
	case s.Deleted:
		return ""
	case p.MaxSessions > 0 && *kept >= p.MaxSessions:
		return ReasonCount
	}
	*kept++
	return ""
}
