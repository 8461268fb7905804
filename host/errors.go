package host

import (
	"context"
	"errors"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
)

// apiError maps an error of the engine to what a client sees. It is the
// one table from the sentinel errors of the packages a request passes
// through (store, process, env, the journal, the session owner, the
// agent loop) to the api's kinds, and so to wire codes; a test reads
// those packages and fails for a sentinel without a row. An *api.Error
// passes as it is, and so does a context error (the caller's deadline or
// cancellation); anything else means the store is unavailable
// (retryable). The cause is kept for errors.Is and for the log; the
// message a client reads is the error's text.
func apiError(err error) error {
	var ae *api.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	kind := kindOf(err)
	switch kind {
	case api.KindStorageUnavailable:
		return api.Wrap(kind, err, "the store is unavailable (%v); retry later", err)
	case api.KindIdempotencyConflict:
		// Another request with the key committed first; a retry is
		// answered from its receipt.
		e := api.Wrap(kind, err, "%v: another request with this idempotency key was committed first; retry to get its result", err)
		e.Retryable = true
		return e
	case api.KindOverloaded:
		return api.Wrap(kind, err, "%v; retry later", err)
	case api.KindRunConflict:
		if errors.Is(err, process.ErrEnded) {
			return api.Wrap(kind, err, "%v", err).With("status", "ended")
		}
	}
	return api.Wrap(kind, err, "%v", err)
}

// kindOf is the kind of err's sentinel; storage_unavailable when it has
// none of the table's.
func kindOf(err error) api.Kind {
	var refused *sandbox.RefusedError
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, process.ErrNotFound):
		return api.KindNotFound
	case errors.Is(err, store.ErrInvalid), errors.Is(err, process.ErrInvalid), errors.Is(err, env.ErrTooLarge),
		errors.Is(err, api.ErrBadHandle):
		return api.KindInvalidParams
	case errors.Is(err, store.ErrReceiptExists):
		return api.KindIdempotencyConflict
	case errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrLeaseHeld), errors.Is(err, process.ErrEnded), errors.Is(err, process.ErrCancelled),
		errors.Is(err, agent.ErrSteersClosed), errors.Is(err, store.ErrInUse), errors.Is(err, store.ErrForkSource):
		// The session has another owner, or the process or run is over;
		// or a purge found the session busy, or a fork's source.
		return api.KindRunConflict
	case errors.Is(err, process.ErrDenied), errors.Is(err, env.ErrDenied), errors.Is(err, env.ErrProtected):
		return api.KindDenied
	case errors.Is(err, process.ErrExists):
		return api.KindAlreadyExists
	case errors.Is(err, process.ErrClosed), errors.Is(err, journal.ErrClosed), errors.Is(err, session.ErrClosed),
		errors.Is(err, agent.ErrHostStopped), errors.Is(err, api.ErrLagged):
		// Shutting down, or a subscriber dropped to resume by cursor.
		return api.KindOverloaded
	case errors.Is(err, journal.ErrCursor):
		return api.KindCursorInvalid
	case errors.Is(err, env.ErrOutside), errors.Is(err, env.ErrNoMount), errors.Is(err, env.ErrReadOnly),
		errors.Is(err, env.ErrBadPath), errors.Is(err, env.ErrNotRegular), errors.As(err, &refused):
		return api.KindEnvironmentUnavailable
	}
	// store.ErrSeqConflict (another writer: the session reloads),
	// store.ErrClosed, and every I/O error.
	return api.KindStorageUnavailable
}
