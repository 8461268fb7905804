-- 0003: requests to people and clients (approvals, questions, client tool
-- calls), the projection of their events like runs.
--
-- Records are JSON (store.Request) beside the columns queries filter and
-- sort on.

CREATE TABLE requests (
	id         TEXT    NOT NULL PRIMARY KEY,
	session_id TEXT    NOT NULL,
	run_id     TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	record     BLOB    NOT NULL
);

CREATE INDEX requests_by_session ON requests (session_id, seq, id);
CREATE INDEX requests_by_status ON requests (status, session_id, seq);
