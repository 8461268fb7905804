package host_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/testenv"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/sqlite"
)

// A real full disk under a real SQLite store: a tmpfs of 8 MiB is filled
// while a run streams; the run ends run.failed (kind storage) once space
// is freed, commands answer storage_unavailable meanwhile, and the next
// run completes, without a restart. Mounting a tmpfs needs root; the
// fault-injecting store covers the same logic everywhere
// (TestStorageFailureEndsRunAndSessionRecovers).
func TestRealDiskFull(t *testing.T) {
	testenv.Root(t, "mounting a tmpfs")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Missing(t, "cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "weft.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := host.New(ctx, host.Config{
		Store: st, StorageRetry: 20 * time.Millisecond, CoalesceWindow: 2 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) {
			key := strings.TrimPrefix(name, "scripted:")
			p, err := scripted.Parse(key, []byte(scripts[key]))
			return &host.Model{Name: name, Provider: p, Model: key}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The run streams for seconds (3,000 tokens, 2 ms apart), so that it
	// is still running when a write first hits the full disk: a shorter
	// one may end before that on a loaded machine, and then no write of
	// its own fails.
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:long"})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, h, api.StartRunParams{SessionID: s.ID, Input: input("go")})
	// Fill the disk while the run streams.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	var refused error
	deadline := time.Now().Add(20 * time.Second)
	for refused == nil && time.Now().Before(deadline) {
		_, err := h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("more"), Busy: api.BusyQueue, IdempotencyKey: fmt.Sprint(time.Now().UnixNano())})
		if errors.Is(err, api.ErrStorageUnavailable) {
			refused = err
		}
		<-time.After(5 * time.Millisecond) // the run's next commit hits the full disk
	}
	if refused == nil {
		t.Fatal("the session never noticed the full disk")
	}
	t.Logf("on a full disk: %v", refused)
	os.Remove(filler)
	w, err := h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 20_000})
	if err != nil || w.Run.Status != record.RunFailed || w.Run.Error == nil || w.Run.Error.Kind != "storage" {
		t.Fatalf("run after the disk was freed: %+v, %v", w, err)
	}
	var next *api.RunResult
	for next == nil {
		next, err = h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: input("again"), Model: "scripted:fast", Busy: api.BusyQueue})
		if err != nil && !errors.Is(err, api.ErrStorageUnavailable) {
			t.Fatal(err)
		}
	}
	if got := wait(t, h, next.ID); got.Status != record.RunCompleted {
		t.Fatalf("the next run: %s", got.Status)
	}
	page, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: s.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range page.Events {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d: a gap", e.Seq, i)
		}
	}
}
