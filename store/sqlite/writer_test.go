package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/event"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
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

// TestGroupCommitIsolatesRefusals writes the appends of several sessions
// in one group transaction: a refused batch (a seq conflict, a receipt
// that exists) fails alone, and the others are stored.
func TestGroupCommitIsolatesRefusals(t *testing.T) {
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
	for _, id := range []string{"a", "b", "c", "d"} {
		if err := s.Append(ctx, batch(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	dup := batch("d", 2)
	dup.Receipts = []record.Receipt{{Key: "k", Method: "run/start", Fingerprint: "f", SessionID: "d", CreatedAt: time.Unix(0, 0)}}
	if err := s.Append(ctx, dup); err != nil {
		t.Fatal(err)
	}
	dup2 := batch("d", 3)
	dup2.Receipts = dup.Receipts
	batches := []store.Batch{batch("a", 2), batch("b", 5), batch("c", 2), dup2}
	want := []error{nil, store.ErrSeqConflict, nil, store.ErrReceiptExists}

	// Hold the connection while every append queues, so that one
	// transaction takes them all.
	s.w.mu.Lock()
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Go(func() { errs[i] = s.Append(ctx, b) })
	}
	for {
		s.w.qmu.Lock()
		n := len(s.w.queue)
		s.w.qmu.Unlock()
		if n == len(batches) {
			break
		}
		runtime.Gosched()
	}
	s.w.mu.Unlock()
	wg.Wait()
	for i, err := range errs {
		if (want[i] == nil) != (err == nil) || (want[i] != nil && !errors.Is(err, want[i])) {
			t.Errorf("append %d (session %s): %v, want %v", i, batches[i].SessionID, err, want[i])
		}
	}
	for id, last := range map[string]int64{"a": 2, "b": 1, "c": 2, "d": 2} {
		evs, err := s.Read(ctx, store.ReadParams{SessionID: id, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if got := evs[len(evs)-1].Seq; got != last {
			t.Errorf("session %s: last seq %d, want %d", id, got, last)
		}
	}
	// The sessions whose batch failed take their next batch.
	if err := s.Append(ctx, batch("b", 2)); err != nil {
		t.Errorf("session b after its refused batch: %v", err)
	}
	if err := s.Append(ctx, batch("d", 3)); err != nil {
		t.Errorf("session d after its refused batch: %v", err)
	}
}

// Every connection's page cache is bounded in bytes: the default 512 KiB,
// CacheBytes rounded up to KiB, or SQLite's own with a negative value.
func TestCacheBytesBoundsEveryConnection(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  int64 // PRAGMA cache_size: negative is KiB
	}{{0, -512}, {100 << 10, -100}, {1000, -1}, {-1, -2000}} {
		s, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "w.db"), CacheBytes: c.bytes})
		if err != nil {
			t.Fatal(err)
		}
		var w, r int64
		if err := s.w.use(t.Context(), func(wc *wconn) error {
			return wc.conn.QueryRowContext(t.Context(), "PRAGMA cache_size").Scan(&w)
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.r.QueryRowContext(t.Context(), "PRAGMA cache_size").Scan(&r); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if w != c.want || r != c.want {
			t.Errorf("CacheBytes %d: cache_size %d (writer), %d (reader); want %d", c.bytes, w, r, c.want)
		}
	}
}
