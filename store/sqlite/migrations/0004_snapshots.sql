-- 0004: snapshots of state derived from a session's log (the transcript),
-- so that loading a session folds only the events after them. A cache:
-- the log stays the truth.

CREATE TABLE snapshots (
	session_id TEXT    NOT NULL,
	kind       TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (session_id, kind)
);
