-- 0006: forks. A fork's log starts with its source's events 1..parent_seq,
-- stored once (in the source's rows) and read through the fork; its own
-- events follow from parent_seq + 1. A source's rows stay while a fork
-- names it (deleting a session only marks it deleted); forks_by_parent
-- finds the forks of a session.

CREATE TABLE forks (
	session_id TEXT    NOT NULL PRIMARY KEY,
	parent_id  TEXT    NOT NULL,
	parent_seq INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX forks_by_parent ON forks (parent_id, parent_seq);
