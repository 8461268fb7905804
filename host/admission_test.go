package host_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/storetest"
)

// A scratch mount's directory is made under the host's scratch
// directory, at <session>/<mount id>: neither a session ID nor a mount
// ID a client sends may lead it anywhere else, and a request refused for
// either makes no directory at all.
func TestScratchMountStaysInScratchDir(t *testing.T) {
	base := t.TempDir()
	scratch := filepath.Join(base, "a", "b", "scratch")
	h, err := host.New(context.Background(), host.Config{Store: memory.New(), ScratchDir: scratch,
		ResolveModel: func(name string) (*host.Model, error) { return nil, fmt.Errorf("no model %q", name) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	s, err := h.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		escape  string // the directory the request must not make, under base
		request func(escape string) error
	}{
		{"mount on an unknown session", "e1", func(escape string) error {
			_, err := h.Mount(ctx, api.MountParams{SessionID: "../../../" + escape, Mount: event.Mount{ID: "x", Kind: event.KindScratch}})
			return err
		}},
		{"mount id", "e2", func(escape string) error {
			_, err := h.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "../../../../" + escape, Kind: event.KindScratch}})
			return err
		}},
		{"a new session's mount id", "e3", func(escape string) error {
			_, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "../../../../" + escape, Kind: event.KindScratch}}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.request(tc.escape)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, api.ErrInvalidParams) && !errors.Is(err, api.ErrNotFound) {
				t.Errorf("refused with %v; want invalid_params or not_found", err)
			}
			if _, serr := os.Stat(filepath.Join(base, tc.escape)); serr == nil {
				t.Errorf("the request made %s, outside the scratch directory", filepath.Join(base, tc.escape))
			}
		})
	}
}

// A timeout too long for a time.Duration is a wait without end (until
// the caller's ctx), not an overflow that times out at once: process/await
// with timeoutMs math.MaxInt64 on a running process waits.
func TestAwaitLongestTimeoutWaits(t *testing.T) {
	h := newProcHost(t, nil)
	sid := session(t, h, "scripted:fast")
	p, err := h.StartProcess(context.Background(), api.ProcessStartParams{SessionID: sid, Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.CancelProcess(context.Background(), api.ProcessCancelParams{ID: p.ID})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r, err := h.AwaitProcess(ctx, api.ProcessAwaitParams{ID: p.ID, TimeoutMs: math.MaxInt64})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("await with the longest timeout: %+v, %v; want it to wait until ctx ends", r, err)
	}
}

// A session's binding holds at most api.MaxMounts mounts: each is a
// directory the host opens whenever it binds the session, so a client
// may not make it open thousands (session/create, or one env/mount at a
// time).
func TestMountsBounded(t *testing.T) {
	scratch := t.TempDir()
	h, err := host.New(context.Background(), host.Config{Store: memory.New(), ScratchDir: scratch,
		ResolveModel: func(name string) (*host.Model, error) { return nil, fmt.Errorf("no model %q", name) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	mounts := func(n int) []event.Mount {
		var ms []event.Mount
		for i := range n {
			ms = append(ms, event.Mount{ID: fmt.Sprintf("m%d", i), Kind: event.KindScratch, Default: i == 0})
		}
		return ms
	}
	_, err = h.CreateSession(ctx, api.CreateSessionParams{Mounts: mounts(api.MaxMounts + 1)})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams || ae.Data["field"] != "mounts" {
		t.Fatalf("session/create with %d mounts: %v; want invalid_params on mounts", api.MaxMounts+1, err)
	}
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: mounts(api.MaxMounts)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "one-more", Kind: event.KindScratch}})
	if !errors.As(err, &ae) || ae.Kind != api.KindInvalidParams || ae.Data["field"] != "mount" {
		t.Fatalf("env/mount past %d mounts: %v; want invalid_params on mount", api.MaxMounts, err)
	}
	// Replacing a mount does not add one.
	if _, err := h.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "m1", Kind: event.KindScratch}, Replace: true}); err != nil {
		t.Fatalf("replace a mount of a full binding: %v", err)
	}
}

// TestMountsBoundedConcurrently: mounts racing for a binding's last place
// get one of them; the binding never holds more than api.MaxMounts.
func TestMountsBoundedConcurrently(t *testing.T) {
	h, err := host.New(context.Background(), host.Config{Store: memory.New(), ScratchDir: t.TempDir(),
		ResolveModel: func(name string) (*host.Model, error) { return nil, fmt.Errorf("no model %q", name) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	var ms []event.Mount
	for i := range api.MaxMounts - 1 {
		ms = append(ms, event.Mount{ID: fmt.Sprintf("m%d", i), Kind: event.KindScratch, Default: i == 0})
	}
	s, err := h.CreateSession(ctx, api.CreateSessionParams{Mounts: ms})
	if err != nil {
		t.Fatal(err)
	}
	const racers = 8
	errs := make(chan error, racers)
	for i := range racers {
		go func() {
			_, err := h.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: fmt.Sprintf("r%d", i), Kind: event.KindScratch}})
			errs <- err
		}()
	}
	ok := 0
	for range racers {
		if err := <-errs; err == nil {
			ok++
		} else if !errors.Is(err, api.ErrInvalidParams) {
			t.Errorf("a refused mount: %v; want invalid_params", err)
		}
	}
	got, err := h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || len(got.Binding.Mounts) != api.MaxMounts {
		t.Fatalf("%d of %d racing mounts taken, binding of %d; want 1 and %d", ok, racers, len(got.Binding.Mounts), api.MaxMounts)
	}
}

// TestRefusedMountsLeaveNoScratch: a session/create whose mounts are
// refused after a scratch mount's directory was made leaves nothing in
// the scratch directory.
func TestRefusedMountsLeaveNoScratch(t *testing.T) {
	scratch := t.TempDir()
	h, err := host.New(context.Background(), host.Config{Store: memory.New(), ScratchDir: scratch,
		ResolveModel: func(name string) (*host.Model, error) { return nil, fmt.Errorf("no model %q", name) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, err = h.CreateSession(context.Background(), api.CreateSessionParams{Mounts: []event.Mount{
		{ID: "work", Kind: event.KindScratch, Default: true},
		{ID: "gone", Path: filepath.Join(t.TempDir(), "missing")},
	}})
	if !errors.Is(err, api.ErrInvalidParams) {
		t.Fatalf("a missing mount: %v; want invalid_params", err)
	}
	if ents, _ := os.ReadDir(scratch); len(ents) != 0 {
		t.Fatalf("the scratch directory holds %v after a refused session/create", ents)
	}
}

// A session/create that the store refuses leaves no scratch directory
// behind; one whose append committed before the store reported an error
// (the connection dropped after the commit) keeps the directories its
// stored mounts name.
func TestScratchDirGoesWithRefusedCreate(t *testing.T) {
	scratch := t.TempDir()
	fst := &storetest.Faulty{Store: memory.New()}
	h, err := host.New(context.Background(), host.Config{Store: fst, ScratchDir: scratch,
		ResolveModel: func(name string) (*host.Model, error) { return nil, fmt.Errorf("no model %q", name) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	params := api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Kind: event.KindScratch, Default: true}}}
	entries := func() []string {
		t.Helper()
		des, err := os.ReadDir(scratch)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}

	fst.Fail(errors.New("disk full"))
	if _, err := h.CreateSession(ctx, params); err == nil {
		t.Fatal("session/create succeeded on a store that refuses writes")
	}
	fst.Fail(nil)
	if left := entries(); len(left) != 0 {
		t.Fatalf("a refused session/create left scratch directories %v", left)
	}

	fst.FailAfterCommit(1, errors.New("the connection dropped after the commit"))
	if _, err := h.CreateSession(ctx, params); err == nil {
		t.Fatal("session/create reported success for an append that reported an error")
	}
	left := entries()
	if len(left) != 1 {
		t.Fatalf("after a create whose append committed: scratch holds %v; want the stored session's directory", left)
	}
	if _, err := fst.Session(ctx, left[0]); err != nil {
		t.Fatalf("scratch directory %s kept for a session the store does not hold: %v", left[0], err)
	}
}
