-- 0007: processes belong to their host, as in PostgreSQL's 0005: a
-- process row names the host that runs it and the lease epoch of its
-- session (both empty with SQLite's leases, which are unfenced flocks of
-- one machine; kept so that both stores have one shape). Additive.

ALTER TABLE processes ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE processes ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
