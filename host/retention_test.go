package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/lease"
	"weft.dev/weft/store"
)

// purged reports whether session sid is gone from the host (not found)
// and from its store.
func purged(t *testing.T, h *host.Host, st store.Store, sid string) bool {
	t.Helper()
	_, serr := st.LastSeq(context.Background(), sid)
	if !errors.Is(serr, store.ErrNotFound) {
		return false
	}
	if _, err := h.GetSession(context.Background(), api.SessionGetParams{SessionID: sid}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("session %s is purged from the store, and the host says %v", sid, err)
	}
	return true
}

func runOnce(t *testing.T, h *host.Host, sid, text string) {
	t.Helper()
	wait(t, h, start(t, h, api.StartRunParams{SessionID: sid, Input: input(text)}).ID)
}

// TestRetentionByAge: the background pass purges a session whose last
// event is older than maxAge, unloading it first (its subscriber's
// stream ends, and a new subscription is not found), and keeps a
// session with newer events.
func TestRetentionByAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, st := newHostWith(t, func(c *host.Config) {
			c.Retention = host.Retention{Policy: store.Retention{MaxAge: time.Hour}, Interval: time.Minute}
		})
		ctx := context.Background()
		old := session(t, h, "scripted:fast")
		runOnce(t, h, old, "one")
		sub, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: old})
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() {
			var last error
			for _, err := range sub {
				last = err
			}
			ended <- last
		}()
		time.Sleep(50 * time.Minute)
		fresh := session(t, h, "scripted:fast")
		runOnce(t, h, fresh, "two")
		time.Sleep(15 * time.Minute) // old: 65 min idle; fresh: 15
		synctest.Wait()
		if !purged(t, h, st, old) {
			t.Fatal("the session idle for longer than maxAge was not purged")
		}
		if purged(t, h, st, fresh) {
			t.Fatal("a session younger than maxAge was purged")
		}
		<-ended // the subscription ended with the purge
		if _, err := h.Subscribe(ctx, api.SubscribeParams{SessionID: old}); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("subscribe to a purged session: %v", err)
		}
		if _, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: old}); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("read a purged session: %v", err)
		}
		if _, err := h.StartRun(ctx, api.StartRunParams{SessionID: old, Input: input("x")}); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("run in a purged session: %v", err)
		}
		runOnce(t, h, fresh, "three") // the kept session goes on
	})
}

// TestRetentionByCountAndDeleted: session/prune keeps the newest
// maxSessions sessions that are not deleted and purges the older ones,
// purges a deleted session once deletedAfter has passed, and lists
// without removing on a dry run.
func TestRetentionByCountAndDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, st := newHostWith(t, func(c *host.Config) {
			c.Retention = host.Retention{Policy: store.Retention{MaxSessions: 2, DeletedAfter: time.Hour}, Interval: -1}
		})
		ctx := context.Background()
		var ids []string // oldest first
		for range 4 {
			ids = append(ids, session(t, h, "scripted:fast"))
			time.Sleep(time.Second)
		}
		gone := session(t, h, "scripted:fast") // the newest, deleted
		if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: gone}); err != nil {
			t.Fatal(err)
		}
		prune := func(dry bool) []string {
			t.Helper()
			res, err := h.PruneSessions(ctx, api.PruneParams{DryRun: dry})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range res.Purged {
				got = append(got, p.SessionID+":"+p.Reason)
			}
			if res.PurgedCount != len(got) || res.Policy.MaxSessions != 2 || res.Policy.DeletedAfter != "1h0m0s" {
				t.Fatalf("result %+v", res)
			}
			return got
		}
		count := []string{ids[1] + ":count", ids[0] + ":count"}
		if got := prune(true); !slices.Equal(got, count) {
			t.Fatalf("dry run lists %v, want %v", got, count)
		}
		if got := prune(false); !slices.Equal(got, count) {
			t.Fatalf("purged %v, want %v", got, count)
		}
		for i, id := range ids {
			if got, want := purged(t, h, st, id), i < 2; got != want {
				t.Errorf("session %d purged: %v, want %v", i, got, want)
			}
		}
		if purged(t, h, st, gone) {
			t.Fatal("a session deleted for less than deletedAfter was purged")
		}
		time.Sleep(time.Hour)
		if got, want := prune(false), []string{gone + ":deleted"}; !slices.Equal(got, want) {
			t.Fatalf("purged %v, want %v", got, want)
		}
		if !purged(t, h, st, gone) {
			t.Fatal("the deleted session was not purged")
		}
	})
}

// TestRetentionLeavesWork: a pass skips a session with an active run and
// the source of a fork it keeps, and purges the source once the fork is
// gone; a fork purged in the same pass goes before its source.
func TestRetentionLeavesWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, st := newHostWith(t, func(c *host.Config) {
			c.Retention = host.Retention{Policy: store.Retention{MaxAge: time.Hour}, Interval: -1}
		})
		ctx := context.Background()
		src := session(t, h, "scripted:fast")
		runOnce(t, h, src, "one")
		both := session(t, h, "scripted:fast")
		runOnce(t, h, both, "one")
		time.Sleep(2 * time.Hour)
		fork, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: src})
		if err != nil {
			t.Fatal(err)
		}
		oldFork, err := h.ForkSession(ctx, api.ForkSessionParams{SessionID: both})
		if err != nil {
			t.Fatal(err)
		}
		busy := session(t, h, "scripted:slow")
		time.Sleep(2 * time.Hour)
		runOnce(t, h, fork.Session.ID, "keep the fork")
		r := start(t, h, api.StartRunParams{SessionID: busy, Input: input("long")})

		res, err := h.PruneSessions(ctx, api.PruneParams{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range res.Purged {
			got = append(got, p.SessionID)
		}
		if want := []string{oldFork.Session.ID, both}; !slices.Equal(got, want) {
			t.Fatalf("purged %v, want the old fork then its source %v", got, want)
		}
		if res.SkippedCount != 1 || res.Skipped[0].SessionID != src {
			t.Fatalf("skipped %+v, want the fork's source %s", res.Skipped, src)
		}
		if purged(t, h, st, src) || purged(t, h, st, busy) {
			t.Fatal("a fork's source or a busy session was purged")
		}
		// The source's history still reads through the fork.
		if evs := allEvents(t, h, fork.Session.ID); evs[0].Type != event.SessionCreated {
			t.Fatalf("the fork's first event is %s", evs[0].Type)
		}
		wait(t, h, r.ID)
		if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: fork.Session.ID}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Hour)
		if _, err := h.PruneSessions(ctx, api.PruneParams{}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{fork.Session.ID, src, busy} {
			if !purged(t, h, st, id) {
				t.Errorf("session %s outlived its retention", id)
			}
		}
	})
}

// blobs returns the hashes of the blobs in the checkpoint directory.
func blobs(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	matches, err := filepath.Glob(filepath.Join(dir, "blobs", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		out = append(out, filepath.Base(m))
	}
	slices.Sort(out)
	return out
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestRetentionSweepsBlobs: the sweep after a purge removes the
// checkpoint blobs only the purged session referenced, keeps those a
// remaining session references, and removes those a rewind of files
// undid.
func TestRetentionSweepsBlobs(t *testing.T) {
	dir := t.TempDir()
	h, st := newHostWith(t, func(c *host.Config) {
		withTools(c)
		c.CheckpointDir = dir
		c.Retention = host.Retention{Policy: store.Retention{DeletedAfter: time.Nanosecond}, Interval: -1, BlobGrace: -1}
	})
	ctx := context.Background()
	a, b := session(t, h, "scripted:sh"), session(t, h, "scripted:sh")
	runOnce(t, h, a, "echo alpha > a.txt")
	mark := lastSeq(t, h, b)
	runOnce(t, h, b, "echo beta > b.txt")
	runOnce(t, h, b, "echo gamma > c.txt")
	if got, want := blobs(t, dir), sorted(sha("alpha\n"), sha("beta\n"), sha("gamma\n")); !slices.Equal(got, want) {
		t.Fatalf("blobs %v, want %v", got, want)
	}
	if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: a}); err != nil {
		t.Fatal(err)
	}
	res, err := h.PruneSessions(ctx, api.PruneParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !purged(t, h, st, a) || res.Blobs == nil || res.Blobs.Removed != 1 || res.Blobs.RemovedBytes != int64(len("alpha\n")) {
		t.Fatalf("prune: %+v, blobs %+v", res, res.Blobs)
	}
	if got, want := blobs(t, dir), sorted(sha("beta\n"), sha("gamma\n")); !slices.Equal(got, want) {
		t.Fatalf("blobs after the purge %v, want %v", got, want)
	}
	// A rewind of files undoes both of b's steps: no later rewind can
	// reach their checkpoints, and the mount no longer has the files.
	if _, err := h.RewindSession(ctx, api.RewindParams{SessionID: b, ToSeq: mark, Files: true}); err != nil {
		t.Fatal(err)
	}
	if res, err = h.PruneSessions(ctx, api.PruneParams{DryRun: true}); err != nil || res.Blobs.Removed != 2 {
		t.Fatalf("dry prune after the rewind: %+v, %v", res.Blobs, err)
	}
	if got := blobs(t, dir); len(got) != 2 {
		t.Fatalf("a dry run removed blobs: %v", got)
	}
	if _, err = h.PruneSessions(ctx, api.PruneParams{}); err != nil {
		t.Fatal(err)
	}
	if got := blobs(t, dir); len(got) != 0 {
		t.Fatalf("blobs after the rewind's sweep: %v, want none", got)
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// TestRetentionLeavesAnotherProcessesSession: a session another process
// on this machine has loaded (it holds the session's flock) is left; once
// it lets go, the session is purged with its lock file.
func TestRetentionLeavesAnotherProcessesSession(t *testing.T) {
	locks, scratch := t.TempDir(), t.TempDir()
	h, st := newHostWith(t, func(c *host.Config) {
		c.Leases, c.ScratchDir = lease.Dir{Path: locks}, scratch
		c.Retention = host.Retention{Policy: store.Retention{MaxAge: time.Nanosecond}, Interval: -1}
	})
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")
	runOnce(t, h, sid, "one")
	if err := os.MkdirAll(filepath.Join(scratch, sid, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := h.PruneSessions(ctx, api.PruneParams{})
	if err != nil || res.PurgedCount != 1 {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(scratch, sid)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the purged session's scratch directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(locks, sid+".lock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the purged session's lock file: %v", err)
	}

	// Another host on the store (another process on this machine, as
	// far as the flocks go) has a session loaded.
	other, _ := newHostWith(t, func(c *host.Config) { c.Store, c.Leases, c.Shared = st, lease.Dir{Path: locks}, true })
	sid = session(t, other, "scripted:fast")
	runOnce(t, other, sid, "one")
	res, err = h.PruneSessions(ctx, api.PruneParams{})
	if err != nil || res.PurgedCount != 0 || res.SkippedCount != 1 || !strings.Contains(res.Skipped[0].Error, "in use") {
		t.Fatalf("prune of a session another process holds: %+v, %v", res, err)
	}
	runOnce(t, other, sid, "two") // it goes on there
	other.Close()
	if res, err = h.PruneSessions(ctx, api.PruneParams{}); err != nil || res.PurgedCount != 1 || !purged(t, h, st, sid) {
		t.Fatalf("prune once the other process let go: %+v, %v", res, err)
	}
}

// TestRetentionInBatches: a background pass purges at most Batch
// sessions; the next pass goes on with the rest.
func TestRetentionInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, st := newHostWith(t, func(c *host.Config) {
			c.Retention = host.Retention{Policy: store.Retention{MaxAge: time.Hour}, Interval: time.Minute, Batch: 2}
		})
		var ids []string
		for range 5 {
			ids = append(ids, session(t, h, "scripted:fast"))
		}
		left := func() int {
			n := 0
			for _, id := range ids {
				if !purged(t, h, st, id) {
					n++
				}
			}
			return n
		}
		time.Sleep(time.Hour - 30*time.Second) // not yet old enough
		synctest.Wait()
		if n := left(); n != 5 {
			t.Fatalf("%d sessions left before the pass, want 5", n)
		}
		for _, want := range []int{3, 1, 0} {
			time.Sleep(time.Minute)
			synctest.Wait()
			if n := left(); n != want {
				t.Fatalf("%d sessions left, want %d", n, want)
			}
		}
	})
}
