-- 0002: durable background processes: the registry (one record per
-- process) and one log per process with its own seq.
--
-- Records are JSON (store.Process) beside the columns queries filter and
-- sort on. Output chunks carry their byte range (out_off, out_size) so that
-- reads by offset and trimming to the output cap use the index; every other
-- event has out_size 0.

CREATE TABLE processes (
	id         TEXT    NOT NULL PRIMARY KEY,
	session_id TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	mount_id   TEXT    NOT NULL DEFAULT '',
	started_at INTEGER NOT NULL,
	last_seq   INTEGER NOT NULL,
	record     BLOB    NOT NULL
);

CREATE INDEX processes_by_session ON processes (session_id, started_at, id);
CREATE INDEX processes_by_status ON processes (status, mount_id, started_at, id);

CREATE TABLE process_events (
	process_id TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	type       TEXT    NOT NULL,
	time       INTEGER NOT NULL,
	data       BLOB,
	out_off    INTEGER NOT NULL DEFAULT 0,
	out_size   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (process_id, seq)
) WITHOUT ROWID;

CREATE INDEX process_output ON process_events (process_id, out_off) WHERE out_size > 0;
