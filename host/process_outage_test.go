package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/internal/proctest"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/record"
	"weft.dev/weft/store/storetest"
)

// TestProcessEndDuringOutageReachesSessionLog: a background process that
// ends while the store refuses writes is recorded as ended, in its own
// log and as process.exited in its session's, once the store is back.
func TestProcessEndDuringOutageReachesSessionLog(t *testing.T) {
	fst := &storetest.Faulty{Store: memory.New()}
	h, s, dir := outageHost(t, fst)
	ctx := context.Background()
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "echo one; while [ ! -e go ]; do sleep 0.01; done; echo two; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, 10*time.Second, func() string { return "no output" }, func() bool {
		r, err := fst.Process(ctx, p.ID)
		return err == nil && r.OutputBytes > 0
	})
	fst.Fail(diskFull)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, 10*time.Second, func() string { return "the end was never offered to the store" }, func() bool {
		for _, ty := range fst.RefusedProcess(p.ID).Types {
			if ty == process.EventFailed {
				return true
			}
		}
		return false
	})
	fst.Fail(nil)
	r, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: p.ID, TimeoutMs: 10000})
	if err != nil || r.TimedOut || r.Process.Status != record.ProcessFailed || *r.Process.ExitCode != 3 || r.Tail != "one\ntwo\n" {
		t.Fatalf("await after the outage: %+v, %v", r, err)
	}
	proctest.Eventually(t, 10*time.Second, func() string { return "process.exited never reached the session log" }, func() bool {
		return len(sessionEvents(t, h, s.ID, event.ProcessExited)) == 1
	})
	var d event.ProcessData
	sessionEvents(t, h, s.ID, event.ProcessExited)[0].Decode(&d)
	if d.ProcessID != p.ID || d.Status != record.ProcessFailed || !strings.Contains(d.Tail, "two") {
		t.Errorf("process.exited = %+v", d)
	}
}

// sessionOutage is a store whose session appends fail while err is set;
// process appends go through. It notes the event types it refused.
type sessionOutage struct {
	store.Store
	mu      sync.Mutex
	err     error
	refused []event.Type
}

func (s *sessionOutage) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *sessionOutage) refusedType(t event.Type) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.refused, t)
}

func (s *sessionOutage) Append(ctx context.Context, b store.Batch) error {
	s.mu.Lock()
	err := s.err
	if err != nil {
		for _, e := range b.Events {
			s.refused = append(s.refused, e.Type)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Store.Append(ctx, b)
}

// TestProcessExitedSurvivesSessionOutage: when the session log refuses
// process.exited (the process's own log took its end), the host writes it
// once the session takes writes again.
func TestProcessExitedSurvivesSessionOutage(t *testing.T) {
	st := &sessionOutage{Store: memory.New()}
	h, s, dir := outageHost(t, st)
	ctx := context.Background()
	p, err := h.StartProcess(ctx, api.ProcessStartParams{SessionID: s.ID, Command: "while [ ! -e go ]; do sleep 0.01; done; echo done; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	st.fail(diskFull)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, 10*time.Second, func() string { return "process.exited was never offered to the session log" }, func() bool {
		return st.refusedType(event.ProcessExited)
	})
	st.fail(nil)
	proctest.Eventually(t, 10*time.Second, func() string { return "process.exited never reached the session log" }, func() bool {
		return len(sessionEvents(t, h, s.ID, event.ProcessExited)) == 1
	})
	var d event.ProcessData
	sessionEvents(t, h, s.ID, event.ProcessExited)[0].Decode(&d)
	if d.ProcessID != p.ID || d.Status != record.ProcessFailed || d.ExitCode == nil || *d.ExitCode != 3 {
		t.Errorf("process.exited = %+v", d)
	}
}

// outageHost is a host with a process manager over st, retrying writes
// every 10 ms, and a session whose default mount is a new directory.
func outageHost(t *testing.T, st store.Store) (*host.Host, *api.SessionResult, string) {
	t.Helper()
	m, err := process.New(process.Config{Store: st, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), host.Config{Store: st, Processes: m, StorageRetry: 10 * time.Millisecond,
		ResolveModel: func(name string) (*host.Model, error) { return nil, fmt.Errorf("no models") }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	dir := t.TempDir()
	s, err := h.CreateSession(context.Background(), api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: dir, Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	return h, s, dir
}
