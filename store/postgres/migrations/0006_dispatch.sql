-- compatible-with: 5
-- 0006: dispatch across hosts. The migration that brings a database to
-- this version also installs River's tables (river_job and the rest, by
-- River's own migrator, in the same transaction): a queued run is a River
-- job inserted with its run.queued event. nodes is the registry of
-- serving hosts: the address where a host takes commands forwarded to
-- the sessions it owns, when it was last seen, and whether it drains.
CREATE TABLE nodes (
	holder     text        NOT NULL PRIMARY KEY,
	addr       text        NOT NULL DEFAULT '',
	version    text        NOT NULL DEFAULT '',
	started_at timestamptz NOT NULL,
	seen_at    timestamptz NOT NULL,
	draining   boolean     NOT NULL DEFAULT false
);
