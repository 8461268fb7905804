-- compatible-with: 4
-- 0005: processes belong to their host. A process row names the host
-- that runs it (its holder name in the leases table) and the lease epoch
-- of its session under which it runs: its log's batches are fenced with
-- that epoch, and a host reconciles a process only once it holds a later
-- lease of the session. Rows written before have '' and 0: reconciled by
-- the next holder of their session's lease. Additive: a host of the
-- version before ignores the columns.

ALTER TABLE processes
	ADD COLUMN host  text   NOT NULL DEFAULT '',
	ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
