-- 0001: the event log, the session and run records, idempotency receipts.
--
-- Times are INTEGER Unix nanoseconds in UTC; the zero time.Time is stored as
-- the smallest int64. Records are JSON (the store.Session and store.Run
-- types) beside the columns queries filter and sort on.

CREATE TABLE events (
	session_id TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	run_id     TEXT    NOT NULL DEFAULT '',
	type       TEXT    NOT NULL,
	time       INTEGER NOT NULL,
	data       BLOB,
	PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE INDEX events_by_run ON events (session_id, run_id, seq);

CREATE TABLE sessions (
	id         TEXT    NOT NULL PRIMARY KEY,
	created_at INTEGER NOT NULL,
	deleted    INTEGER NOT NULL DEFAULT 0,
	record     BLOB    NOT NULL
);

CREATE INDEX sessions_by_created ON sessions (created_at, id);

CREATE TABLE runs (
	id         TEXT    NOT NULL PRIMARY KEY,
	session_id TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	first_seq  INTEGER NOT NULL,
	record     BLOB    NOT NULL
);

CREATE INDEX runs_by_session ON runs (session_id, created_at, first_seq, id);
CREATE INDEX runs_by_status ON runs (status, created_at, first_seq, id);

CREATE TABLE receipts (
	key         TEXT    NOT NULL,
	method      TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	result      BLOB,
	session_id  TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	PRIMARY KEY (key, method)
) WITHOUT ROWID;

CREATE INDEX receipts_by_created ON receipts (created_at);
