package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	msqlite "modernc.org/sqlite"
)

// walCheckpointPages is how many pages the writer commits to the WAL
// before it asks the checkpointer to copy them into the database file:
// SQLite's own auto-checkpoint threshold (about 4 MB of 4 KiB pages).
const walCheckpointPages = 1000

// checkpointTimeout bounds one checkpoint, so that Close never waits long
// for one on a disk that has stopped answering.
const checkpointTimeout = time.Minute

// checkpointer copies the WAL into the database file on a connection and
// goroutine of its own, so that no commit waits for it. SQLite's automatic
// checkpoint runs inside the COMMIT that crosses its threshold, on the
// committing connection: that commit, and every write queued behind the
// store's one writer, then waits for the checkpoint's writes and its two
// fsyncs (tens of milliseconds on a slow disk, the tail of every append
// and run start). The writer turns it off (wal_autocheckpoint(0)) and
// counts the pages it commits instead ([writer.committed]); every
// walCheckpointPages it wakes the checkpointer, which runs a PASSIVE
// checkpoint: it copies what no reader still needs while the writer goes
// on appending to the WAL, which starts over from its beginning at the
// first commit after a checkpoint has copied all of it.
//
// Durability is unchanged: a commit is in the WAL before it returns, as
// before, and a checkpoint syncs the WAL before it copies it. A checkpoint
// that fails (a full disk) is logged and tried again at the next wake-up;
// the WAL keeps every commit meanwhile. Closing the store's last
// connection checkpoints what is left.
type checkpointer struct {
	db     *sql.DB // one connection, not query_only: a checkpoint writes the file
	logger *slog.Logger
	wake   chan struct{} // one pending wake-up at most
	stop   chan struct{}
	done   chan struct{}
}

// newCheckpointer starts the checkpointer of the database db opens; stop
// it with close.
func newCheckpointer(db *sql.DB, logger *slog.Logger) *checkpointer {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	c := &checkpointer{db: db, logger: logger, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

// nudge asks for a checkpoint, without waiting for it.
func (c *checkpointer) nudge() {
	select {
	case c.wake <- struct{}{}:
	default: // one is due already
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		c.checkpoint()
	}
}

// checkpoint runs one PASSIVE checkpoint: it copies the WAL's frames that
// no reader needs any more, and waits for no lock.
func (c *checkpointer) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
	defer cancel()
	var busy, frames, copied int64
	if err := c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		c.logger.Warn("store checkpoint", "err", err)
		return
	}
	c.logger.Debug("store checkpoint", "frames", frames, "copied", copied)
}

// close stops the checkpointer, waiting for a checkpoint in progress, and
// closes its connection.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}

// pagesWritten returns how many pages the connection has written since
// the last call (to the WAL, in WAL mode), or 0 when the driver cannot
// tell.
func pagesWritten(conn *sql.Conn) int {
	var n int
	conn.Raw(func(dc any) error {
		if st, ok := dc.(msqlite.DBStatus); ok {
			n, _, _ = st.Status(msqlite.DBStatusCacheWrite, true)
		}
		return nil
	})
	return n
}
