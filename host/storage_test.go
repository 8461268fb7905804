package host_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/storetest"
)

// diskFull is what a store returns when its disk is full.
var diskFull = &fs.PathError{Op: "write", Path: "weft.db-wal", Err: syscall.ENOSPC}

func newFaultHost(t *testing.T, fst *storetest.Faulty) *host.Host {
	t.Helper()
	h, err := host.New(context.Background(), host.Config{
		Store: fst, DefaultModel: "scripted:fast", CoalesceWindow: 2 * time.Millisecond, StorageRetry: 10 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			src, ok := scripts[key]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(key+".json", []byte(src))
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: name, Provider: p, Model: key}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// A write failure mid-run (disk full) ends the run as failed with kind
// storage once the store takes writes again; meanwhile commands answer
// storage_unavailable (retryable, with the cause), run/wait waits, and
// the session recovers by itself: nothing committed is lost, no seq is
// skipped, and the next run completes.
func TestStorageFailureEndsRunAndSessionRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fst := &storetest.Faulty{Store: memory.New()}
		h := newFaultHost(t, fst)
		ctx := context.Background()
		s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:slow"})
		if err != nil {
			t.Fatal(err)
		}
		r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
		time.Sleep(100 * time.Millisecond) // the run streams
		before, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		fst.Fail(diskFull)
		time.Sleep(200 * time.Millisecond) // the next commit fails

		_, err = h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("more"), Busy: api.BusyQueue})
		var ae *api.Error
		if !errors.Is(err, api.ErrStorageUnavailable) || !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &ae) || !ae.Retryable {
			t.Fatalf("run/start on a full disk: %v; want storage_unavailable, retryable, caused by ENOSPC", err)
		}
		if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: s.ID}); !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatalf("session/delete on a full disk: %v", err)
		}
		if _, err := h.CancelRun(ctx, api.CancelParams{RunID: r.ID}); !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatalf("run/cancel on a full disk: %v", err)
		}
		w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 500})
		if err != nil || !w.TimedOut {
			t.Fatalf("run/wait on a full disk = %+v, %v; want it to wait out its timeout", w, err)
		}

		fst.Fail(nil) // the operator frees the disk
		w, err = h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 10_000})
		if err != nil || w.Run.Status != record.RunFailed || w.Run.Error == nil || w.Run.Error.Kind != "storage" {
			t.Fatalf("run after recovery = %+v, %v; want failed with kind storage", w.Run, err)
		}
		// The run's end is written before the session takes commands again:
		// a client retries the retryable error, as it would any.
		next, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("again"), Model: "scripted:fast"})
		for errors.Is(err, api.ErrStorageUnavailable) {
			time.Sleep(time.Millisecond)
			next, err = h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("again"), Model: "scripted:fast"})
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := wait(t, h, next.ID); got.Status != record.RunCompleted {
			t.Fatalf("next run: %s", got.Status)
		}
		after, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range after.Events {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d: the log has a gap", i, e.Seq)
			}
		}
		for _, e := range before.Events {
			got := after.Events[e.Seq-1]
			if got.Type != e.Type || string(got.Data) != string(e.Data) {
				t.Fatalf("committed event %d changed: %s %s, now %s %s", e.Seq, e.Type, e.Data, got.Type, got.Data)
			}
		}
		var ended int
		for _, e := range after.Events {
			if e.RunID == r.ID && event.IsTerminalRun(e.Type) {
				ended++
			}
		}
		if ended != 1 {
			t.Fatalf("run %s has %d terminal events", r.ID, ended)
		}
	})
}

// A failure while creating a session answers storage_unavailable and
// leaves nothing behind; once the disk is freed the same request works.
func TestStorageFailureOnCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fst := &storetest.Faulty{Store: memory.New()}
		h := newFaultHost(t, fst)
		ctx := context.Background()
		fst.Fail(diskFull)
		if _, err := h.CreateSession(ctx, api.CreateSessionParams{Title: "t", IdempotencyKey: "k"}); !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatalf("create on a full disk: %v", err)
		}
		fst.Fail(nil)
		s, err := h.CreateSession(ctx, api.CreateSessionParams{Title: "t", IdempotencyKey: "k"})
		if err != nil || s.Replayed {
			t.Fatalf("create after the disk was freed: %+v, %v", s, err)
		}
		l, err := h.ListSessions(ctx, api.ListSessionsParams{})
		if err != nil || len(l.Sessions) != 1 {
			t.Fatalf("sessions: %+v, %v", l, err)
		}
	})
}
