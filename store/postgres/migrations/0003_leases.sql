-- 0003: session leases. A session is owned by one host at a time: the
-- holder of its row while expires_at (the database's clock) is ahead.
-- epoch is the fencing token: it grows by one at every take-over and
-- never goes back (a released lease keeps its row, expired), and every
-- append checks it under the session's advisory lock, which a take-over
-- takes too, so an append commits only under the current epoch.
CREATE TABLE leases (
	session_id  text        NOT NULL PRIMARY KEY,
	holder      text        NOT NULL,
	epoch       bigint      NOT NULL CHECK (epoch > 0),
	acquired_at timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL
);

-- weft nodes: the live leases by holder.
CREATE INDEX leases_by_holder ON leases (holder, expires_at);
