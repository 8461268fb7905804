-- 0001: the session logs and their records (sessions, runs, requests),
-- idempotency receipts, and the process registry with one log per
-- process: the schema of store/sqlite's migrations 1-3 in one step.
--
-- Times are bigint Unix nanoseconds in UTC, as in SQLite: timestamptz
-- keeps microseconds and the store contract keeps nanoseconds. The zero
-- time.Time is the smallest bigint. Event data and receipt results are the
-- bytes the store was given (bytea: never re-encoded, never refused for
-- their encoding); records are JSON of the store's record types (json
-- keeps their text as written, readable with -> and ->>) beside the
-- columns that queries filter and sort on.

-- The session logs. The primary key makes an overwrite impossible; an
-- append checks last seq + 1 under a per-session advisory lock in its
-- transaction, so seqs run 1, 2, 3 … without a gap. Reads after a cursor
-- are a range scan of the primary key.
CREATE TABLE events (
	session_id text   NOT NULL,
	seq        bigint NOT NULL CHECK (seq > 0),
	run_id     text   NOT NULL DEFAULT '',
	type       text   NOT NULL,
	time       bigint NOT NULL,
	data       bytea,
	PRIMARY KEY (session_id, seq)
);

CREATE INDEX events_by_run ON events (session_id, run_id, seq);

CREATE TABLE sessions (
	id         text    NOT NULL PRIMARY KEY,
	created_at bigint  NOT NULL,
	deleted    boolean NOT NULL DEFAULT false,
	record     json    NOT NULL
);

CREATE INDEX sessions_by_created ON sessions (created_at, id);

CREATE TABLE runs (
	id         text   NOT NULL PRIMARY KEY,
	session_id text   NOT NULL,
	status     text   NOT NULL,
	created_at bigint NOT NULL,
	first_seq  bigint NOT NULL,
	record     json   NOT NULL
);

CREATE INDEX runs_by_session ON runs (session_id, created_at, first_seq, id);
CREATE INDEX runs_by_status ON runs (status, created_at, first_seq, id);

-- Requests to people and clients (approvals, questions, client tool
-- calls).
CREATE TABLE requests (
	id         text   NOT NULL PRIMARY KEY,
	session_id text   NOT NULL,
	run_id     text   NOT NULL,
	status     text   NOT NULL,
	seq        bigint NOT NULL,
	record     json   NOT NULL
);

CREATE INDEX requests_by_session ON requests (session_id, seq, id);
CREATE INDEX requests_by_status ON requests (status, session_id, seq);

CREATE TABLE receipts (
	key         text   NOT NULL,
	method      text   NOT NULL,
	fingerprint text   NOT NULL,
	result      bytea,
	session_id  text   NOT NULL DEFAULT '',
	created_at  bigint NOT NULL,
	PRIMARY KEY (key, method)
);

CREATE INDEX receipts_by_created ON receipts (created_at);

-- Durable background processes: the registry and one log per process with
-- its own seq (last_seq, checked under a per-process advisory lock, since
-- dropped output may leave the log's last rows gone). Output chunks carry
-- their byte range so that reads by offset and trimming use an index.
CREATE TABLE processes (
	id         text   NOT NULL PRIMARY KEY,
	session_id text   NOT NULL,
	status     text   NOT NULL,
	mount_id   text   NOT NULL DEFAULT '',
	started_at bigint NOT NULL,
	last_seq   bigint NOT NULL,
	grants     text[] NOT NULL DEFAULT '{}',
	record     json   NOT NULL
);

CREATE INDEX processes_by_session ON processes (session_id, started_at, id);
CREATE INDEX processes_by_status ON processes (status, mount_id, started_at, id);
CREATE INDEX processes_by_grant ON processes USING gin (grants);

CREATE TABLE process_events (
	process_id text   NOT NULL,
	seq        bigint NOT NULL CHECK (seq > 0),
	type       text   NOT NULL,
	time       bigint NOT NULL,
	data       bytea,
	out_off    bigint NOT NULL DEFAULT 0,
	out_size   bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (process_id, seq)
);

CREATE INDEX process_output ON process_events (process_id, out_off) WHERE out_size > 0;
