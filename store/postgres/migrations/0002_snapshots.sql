-- 0002: snapshots of state derived from a session's log (the transcript),
-- so that loading a session folds only the events after them. A cache:
-- the log stays the truth.

CREATE TABLE snapshots (
	session_id text   NOT NULL,
	kind       text   NOT NULL,
	seq        bigint NOT NULL,
	data       bytea  NOT NULL,
	created_at bigint NOT NULL,
	PRIMARY KEY (session_id, kind)
);
