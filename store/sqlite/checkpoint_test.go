package sqlite

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// TestCheckpointOffTheCommitPath checks that no commit checkpoints the WAL
// (the writer's connection has SQLite's automatic checkpoint off) and that
// the WAL still reaches the database file: once the writer has committed
// more than walCheckpointPages pages, the checkpointer copies them.
func TestCheckpointOffTheCommitPath(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.w.use(ctx, func(c *wconn) error {
		return c.conn.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&auto)
	}); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Errorf("the writer's wal_autocheckpoint is %d; want 0 (its commits must not checkpoint)", auto)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// About 1.5 × walCheckpointPages pages of events.
	data, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 6000)})
	const perBatch = 16
	var seq int64
	for range walCheckpointPages * 3 / 2 * 4096 / (perBatch * len(data)) {
		b := store.Batch{SessionID: "ses_ckpt"}
		for range perBatch {
			seq++
			b.Events = append(b.Events, event.Event{SessionID: "ses_ckpt", Seq: seq, Type: event.MessageDelta, Time: time.Unix(seq, 0), Data: data})
		}
		if err := s.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpoint runs on its own goroutine and disk: wait for the
	// database file to receive the pages.
	want := before.Size() + walCheckpointPages*4096
	deadline := time.Now().Add(time.Minute)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes a minute after %d events; want ≥ %d: the WAL was not checkpointed", fi.Size(), seq, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Everything appended reads back.
	got, err := s.Read(ctx, store.ReadParams{SessionID: "ses_ckpt", Limit: 10_000})
	if err != nil || int64(len(got)) != seq {
		t.Fatalf("read %d events, %v; want %d", len(got), err, seq)
	}
}
