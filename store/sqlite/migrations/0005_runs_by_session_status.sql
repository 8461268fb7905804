-- 0005: loading a session reads its runs that have not ended (queued,
-- running, waiting). With only runs_by_session, SQLite walked every run
-- of the session in order and checked each row's status: 28 ms for a
-- session of 6,600 runs, on every load. This index finds them directly.

CREATE INDEX runs_by_session_status ON runs (session_id, status, created_at, first_seq, id);
