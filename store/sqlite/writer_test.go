package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
)

// TestLastSeqCacheBound checks that the writer remembers the last seq of
// at most maxCachedSessions sessions, and that a session it forgot is
// checked against the log again.
func TestLastSeqCacheBound(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "weft.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := func(id string, seq int64) store.Batch {
		return store.Batch{SessionID: id, Events: []event.Event{{
			SessionID: id, Seq: seq, Type: event.MessageUser, Time: time.Unix(0, 0), Data: json.RawMessage(`{}`),
		}}}
	}
	const n = maxCachedSessions + 10
	for i := range n {
		if err := s.Append(ctx, batch(fmt.Sprint(i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	var cached int
	s.w.use(ctx, func(c *wconn) error {
		cached = len(c.last)
		return nil
	})
	if cached != maxCachedSessions {
		t.Errorf("%d sessions cached after appending to %d; want %d", cached, n, maxCachedSessions)
	}
	for i := range n {
		id := fmt.Sprint(i)
		if err := s.Append(ctx, batch(id, 3)); err == nil {
			t.Fatalf("session %s: append of seq 3 after 1 succeeded", id)
		}
		if err := s.Append(ctx, batch(id, 2)); err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
	}
}
