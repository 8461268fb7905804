package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	msqlite "modernc.org/sqlite"
)

// The WAL's checkpoints. SQLite's automatic checkpoint runs inside the
// COMMIT that takes the WAL past its threshold, on the committing
// connection: that commit, and every write queued behind the store's one
// writer, waits for the checkpoint's copy and its two fsyncs, which was
// the tail of run start (BENCHMARKS.md §38). The writer instead
// checkpoints when it is idle, on its own connection under its own lock
// ([writer.idleCheckpoint]): no write can append to the WAL meanwhile, so
// a checkpoint no reader holds back copies all of it, and the next write
// transaction starts the WAL over from its beginning. SQLite's automatic
// checkpoint stays on the same connection at a higher threshold as the
// backstop of a writer that is never idle. There is one checkpointer, the
// writer's connection, so no checkpoint is ever refused for another's
// (a checkpointer on a connection of its own beside a writer that never
// pauses never finds the WAL wholly copied, and the WAL grows without
// bound: BENCHMARKS.md §38). While writes go on, the goroutine fsyncs the
// WAL file outside the writer's lock (walSyncEvery), so that the
// backstop's own fsync of the WAL has little left to flush.
//
// A reader whose transaction began before the last commit holds the
// frames after its snapshot back from a checkpoint and keeps the next
// write from starting the WAL over. The store's reads are single queries
// with a limit, copied out before they return, so a reader holds its
// snapshot for one query at most; a checkpoint that could not copy
// everything is tried again at the next idle moment.
const (
	// ckptIdle is how long the writer must have had nothing to write
	// before it checkpoints: longer than the gaps inside a burst of
	// appends (a commit takes well under a millisecond, and what arrives
	// meanwhile waits in the group-commit queue), shorter than the
	// 10–30 ms a model's stream leaves between deltas, so that the
	// checkpoint fits in such a gap. A write that arrives during a
	// checkpoint waits for it, one checkpoint at most.
	ckptIdle = 2 * time.Millisecond
	// ckptPages is how many pages the writer must have written since its
	// last complete checkpoint before an idle moment checkpoints:
	// SQLite's own threshold, so that the WAL is copied and synced as
	// often as before, only no longer inside a commit.
	ckptPages = 1000
	// ckptBackstopPages is the threshold of SQLite's automatic checkpoint
	// on the writer's connection: a writer that is never idle for
	// ckptIdle checkpoints inside the commit that takes the WAL past
	// these many pages (about 16 MB), which bounds the WAL.
	ckptBackstopPages = 4000
	// walSyncEvery is how often, while the writer keeps writing, the
	// checkpointer fsyncs the WAL file outside the writer's lock. A
	// checkpoint begins by syncing the WAL; with synchronous=NORMAL no
	// commit does, so a checkpoint inside a commit (the backstop) used to
	// flush every frame since the last one — about 15 ms for its 16 MB on
	// a plain disk — while every write waited. Synced as it goes, the WAL
	// leaves that checkpoint little to flush. It adds durability, never
	// takes any away.
	walSyncEvery = 20 * time.Millisecond
	// walSyncRetry is how long the WAL's syncs pause after one failed (a
	// full or failing disk): they start again by themselves once the
	// fault clears.
	walSyncRetry = 10 * time.Second
)

// checkpointer is the writer's idle checkpointer: a goroutine that waits
// for writes, then for the writer to be idle, then checkpoints on the
// writer's connection. The writer counts its transactions (writes) and
// wakes the goroutine (kick) without waiting; nothing else touches the
// write path.
type checkpointer struct {
	logger *slog.Logger
	kick   chan struct{} // a write happened; one pending wake-up at most
	stop   chan struct{} // closed by stopCheckpointer
	done   chan struct{} // closed when the goroutine has returned

	// pages counts the pages written since the last complete checkpoint
	// (the writer's lock guards it).
	pages int
	// hook, when set (by tests), runs under the writer's lock before an
	// idle checkpoint.
	hook func()

	// walPath is the WAL file, which the goroutine syncs while writes
	// go on (walSyncEvery); walSyncs counts those syncs (for tests).
	walPath  string
	walSyncs atomic.Int64
}

// startCheckpointer starts the writer's idle checkpointer; the writer's
// close stops it.
func (w *writer) startCheckpointer(logger *slog.Logger, dbPath string) {
	w.ckpt = &checkpointer{
		logger:  logger,
		walPath: dbPath + "-wal",
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go w.checkpointLoop(w.ckpt)
}

// wrote tells the checkpointer that the writer has written: one atomic
// add, and a send that never waits.
func (w *writer) wrote() {
	w.writes.Add(1)
	if w.ckpt != nil {
		select {
		case w.ckpt.kick <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// checkpointLoop is the checkpointer's goroutine. After each write it
// polls the writer's count of transactions every ckptIdle (one timer, reset
// by the goroutine itself, never by a write) until the count stands
// still, then checkpoints if enough pages wait in the WAL.
func (w *writer) checkpointLoop(c *checkpointer) {
	defer close(c.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var wal *os.File       // the WAL, opened at its first sync (walSyncEvery)
	var walRetry time.Time // after a failed sync, when to try again
	defer func() {
		if wal != nil {
			wal.Close()
		}
	}()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		seen := w.writes.Load()
		synced := time.Now()
		for {
			t.Reset(ckptIdle)
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			n := w.writes.Load()
			if n != seen {
				seen = n
				if now := time.Now(); now.Sub(synced) >= walSyncEvery && !now.Before(walRetry) {
					synced = now
					if wal = c.syncWAL(wal); wal == nil {
						walRetry = now.Add(walSyncRetry)
					}
				}
				continue
			}
			// The writes seen so far are in the count; a later one
			// kicks again.
			select {
			case <-c.kick:
			default:
			}
			if w.idleCheckpoint(c, seen) {
				break
			}
			seen = w.writes.Load() // a write came first: wait for the next idle moment
		}
	}
}

// idleCheckpoint checkpoints the WAL on the writer's connection if the
// writer has written nothing since its count was seen and at least
// ckptPages pages since its last complete checkpoint. It holds the
// writer's lock throughout, so no write appends to the WAL meanwhile. It
// reports false if a write came in after seen, and true otherwise.
func (w *writer) idleCheckpoint(c *checkpointer, seen uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writes.Load() != seen {
		return false
	}
	if w.closed || w.c == nil {
		return true
	}
	c.pages += pagesWritten(w.c.conn)
	if c.pages < ckptPages {
		return true
	}
	if c.hook != nil {
		c.hook()
	}
	start := time.Now()
	// PASSIVE waits for no lock: the writer's lock keeps this process's
	// writes out, and a checkpoint of another process (against the
	// one-writer rule) makes this one fail with SQLITE_BUSY, to be tried
	// at the next idle moment.
	var busy, frames, copied int
	err := w.c.conn.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	if err != nil {
		c.logger.Warn("store checkpoint", "err", err)
		return true
	}
	w.checkpoints.Add(1)
	if busy == 0 && copied == frames {
		c.pages = 0
	}
	c.logger.Debug("store checkpoint", "frames", frames, "copied", copied, "pages", c.pages, "took", time.Since(start))
	return true
}

// syncWAL fsyncs the WAL file through wal, opening it first if wal is
// nil or no longer the file at walPath (SQLite deletes the WAL when its
// last connection closes, and the next one makes a new file), and returns
// the file to sync next time, or nil if it cannot be synced: then the
// checkpoints sync it alone, as before, until the next try
// (walSyncRetry later).
func (c *checkpointer) syncWAL(wal *os.File) *os.File {
	if wal != nil {
		at, err := os.Stat(c.walPath)
		held, herr := wal.Stat()
		if err != nil || herr != nil || !os.SameFile(at, held) {
			wal.Close()
			wal = nil
		}
	}
	if wal == nil {
		f, err := os.OpenFile(c.walPath, os.O_RDWR, 0)
		if err != nil {
			c.logger.Debug("store WAL sync: open", "err", err)
			return nil
		}
		wal = f
	}
	if err := wal.Sync(); err != nil {
		c.logger.Debug("store WAL sync", "err", err)
		wal.Close()
		return nil
	}
	c.walSyncs.Add(1)
	return wal
}

// stopCheckpointer stops the idle checkpointer and waits for it, and for
// a checkpoint it is running, to end. The writer's lock must not be held.
func (w *writer) stopCheckpointer() {
	if w.ckpt == nil {
		return
	}
	select {
	case <-w.ckpt.stop:
	default:
		close(w.ckpt.stop)
	}
	<-w.ckpt.done
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
