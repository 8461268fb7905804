package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// walFrameBytes is the size of a WAL frame of a 4 KiB page: its header
// and the page.
const walFrameBytes = 24 + 4096

// bigData is an event's data of about 3 KB, so that every event takes
// most of a page of its own.
var bigData, _ = json.Marshal(map[string]string{"text": strings.Repeat("x", 3000)})

// appendEvents appends n events in batches of per to session id, from
// seq first on.
func appendEvents(t testing.TB, s *Store, id string, first int64, n, per int) {
	t.Helper()
	ctx := context.Background()
	seq := first
	for n > 0 {
		b := store.Batch{SessionID: id}
		for range min(per, n) {
			b.Events = append(b.Events, event.Event{SessionID: id, Seq: seq, Type: event.MessageDelta, Time: time.Unix(seq, 0), Data: bigData})
			seq++
			n--
		}
		if err := s.Append(ctx, b); err != nil {
			t.Error(err)
			return
		}
	}
}

// walSize returns the size of the store's WAL file: the most frames it
// has held since it was created, as a WAL that starts over is written
// from its beginning again, not truncated.
func walSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestWALBoundedWithoutIdle appends from several sessions at once, with
// readers beside them, and never lets the writer be idle (its idle
// checkpointer is stopped): SQLite's automatic checkpoint on the writer's
// connection, the backstop, must keep the WAL near ckptBackstopPages. A
// checkpointer on a connection of its own (BENCHMARKS.md §38) lets the
// WAL grow with every append here.
func TestWALBoundedWithoutIdle(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "weft.db")
	s, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.w.stopCheckpointer()

	const sessions, perSession = 4, 3 * ckptBackstopPages / 8 // about three times the backstop's pages of WAL in all
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range sessions {
		id := fmt.Sprintf("ses_%d", i)
		wg.Go(func() { appendEvents(t, s, id, 1, perSession, 8) })
	}
	var rg sync.WaitGroup
	rg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := s.Read(context.Background(), store.ReadParams{SessionID: "ses_0", Limit: 4})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	rg.Wait()

	// The backstop checkpoints in the commit that takes the WAL past
	// ckptBackstopPages; that commit and a group's worth more fit twice
	// over.
	if got, bound := walSize(t, path), int64(2*ckptBackstopPages*walFrameBytes); got > bound {
		t.Errorf("WAL is %d bytes (%d frames) after %d events; want ≤ %d (%d frames)",
			got, got/walFrameBytes, sessions*perSession, bound, bound/walFrameBytes)
	}
	if n := s.w.checkpoints.Load(); n != 0 {
		t.Errorf("%d idle checkpoints with the idle checkpointer stopped", n)
	}
}

// TestCheckpointWhenIdle writes a burst of more than ckptPages pages,
// below the backstop, then leaves the writer idle: the writer copies the
// WAL into the database file by itself, and the next burst starts the WAL
// over instead of growing it.
func TestCheckpointWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "weft.db")
		s, err := Open(context.Background(), Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		size := func() int64 {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			return fi.Size()
		}
		before := size()
		const burst = ckptPages * 3 / 2
		appendEvents(t, s, "ses_idle", 1, burst, 16)
		if n := s.w.checkpoints.Load(); n != 0 {
			t.Fatalf("%d checkpoints during the burst; want none before the writer is idle", n)
		}
		if size() != before {
			t.Fatalf("database file grew during the burst: checkpointed in a commit")
		}
		time.Sleep(10 * ckptIdle)
		if n := s.w.checkpoints.Load(); n != 1 {
			t.Fatalf("%d checkpoints after the writer was idle for %v; want 1", n, 10*ckptIdle)
		}
		if got, want := size(), before+burst*4096; got < want {
			t.Errorf("database file is %d bytes after the idle checkpoint; want ≥ %d", got, want)
		}
		wal := walSize(t, path)
		const burst2 = ckptPages * 5 / 4 // fewer pages than the first
		appendEvents(t, s, "ses_idle", burst+1, burst2, 16)
		if got := walSize(t, path); got != wal {
			t.Errorf("WAL grew from %d to %d bytes after an idle checkpoint; want it started over", wal, got)
		}
		time.Sleep(10 * ckptIdle)
		if n := s.w.checkpoints.Load(); n != 2 {
			t.Errorf("%d checkpoints after the second burst; want 2", n)
		}
		// A small write and an idle moment: too few pages to copy.
		appendEvents(t, s, "ses_idle", burst+burst2+1, 1, 1)
		time.Sleep(10 * ckptIdle)
		if n := s.w.checkpoints.Load(); n != 2 {
			t.Errorf("%d checkpoints after a one-event write; want still 2", n)
		}
		got, err := s.Read(context.Background(), store.ReadParams{SessionID: "ses_idle", Limit: 10_000})
		if err != nil || len(got) != burst+burst2+1 {
			t.Fatalf("read %d events, %v; want %d", len(got), err, burst+burst2+1)
		}
	})
}

// TestCloseDuringIdleCheckpoint closes the store while the writer runs an
// idle checkpoint: Close waits for it, returns no error, stops the
// checkpointer's goroutine, and everything appended reads back after a
// new open. The bubble's clock keeps the checkpoint out of the burst.
func TestCloseDuringIdleCheckpoint(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n = ckptPages * 3 / 2
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	synctest.Test(t, func(t *testing.T) {
		s, err := Open(ctx, Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		entered := make(chan struct{})
		s.w.mu.Lock()
		c := s.w.ckpt
		c.hook = func() {
			close(entered)
			<-c.stop // until Close has begun
		}
		s.w.mu.Unlock()
		appendEvents(t, s, "ses_close", 1, n, 16)
		time.Sleep(10 * ckptIdle)
		<-entered
		if err := s.Close(); err != nil {
			t.Fatalf("close during a checkpoint: %v", err)
		}
		if n := s.w.checkpoints.Load(); n != 1 {
			t.Errorf("%d checkpoints; want the 1 that Close waited for", n)
		}
	})
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Read(ctx, store.ReadParams{SessionID: "ses_close", Limit: 10_000})
	if err != nil || len(got) != n {
		t.Fatalf("read %d events, %v; want %d", len(got), err, n)
	}
}

// TestWALSyncedWhileWriting keeps the writer busy, never idle for
// ckptIdle, for several walSyncEvery: the checkpointer fsyncs the WAL as
// it goes, outside the writer's lock, so that the backstop checkpoint
// finds little to flush, and it checkpoints nothing meanwhile (the writer
// is never idle). Everything appended reads back.
func TestWALSyncedWhileWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "weft.db")
		s, err := Open(context.Background(), Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		const rounds = 8 * int(walSyncEvery/(ckptIdle/2))
		for i := range rounds {
			appendEvents(t, s, "ses_busy", int64(i*4+1), 4, 4)
			time.Sleep(ckptIdle / 2)
		}
		if n := s.w.ckpt.walSyncs.Load(); n < 2 {
			t.Errorf("%d WAL syncs during %v of writes; want one every %v", n, time.Duration(rounds)*ckptIdle/2, walSyncEvery)
		}
		if n := s.w.checkpoints.Load(); n != 0 {
			t.Errorf("%d checkpoints while the writer was never idle", n)
		}
		got, err := s.Read(context.Background(), store.ReadParams{SessionID: "ses_busy", Limit: 10_000})
		if err != nil || len(got) != rounds*4 {
			t.Fatalf("read %d events, %v; want %d", len(got), err, rounds*4)
		}
	})
}

// syncWAL follows the WAL file when SQLite replaced it (it deletes the
// WAL when its last connection closes and the next one makes a new
// file), and a failed sync gives up the file rather than the syncs.
func TestSyncWALFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db-wal")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &checkpointer{logger: slog.New(slog.DiscardHandler), walPath: path}
	wal := c.syncWAL(nil)
	if wal == nil {
		t.Fatal("the first sync failed")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	wal = c.syncWAL(wal)
	if wal == nil {
		t.Fatal("the sync after the WAL was replaced failed")
	}
	defer wal.Close()
	at, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	held, err := wal.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(at, held) {
		t.Fatal("the sync kept the deleted WAL's descriptor")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := c.syncWAL(wal); got != nil {
		got.Close()
		t.Fatal("a sync with no WAL file reported success")
	}
	if n := c.walSyncs.Load(); n != 2 {
		t.Fatalf("%d syncs counted, want 2", n)
	}
}
