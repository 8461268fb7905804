package rpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
)

// The Go client's process/write, process/grant and process/revoke (which
// it lacked) reach a host over the wire: stdin arrives and closes, a grant
// lets another session see the process, a revoke takes that back.
func TestClientWriteGrantRevoke(t *testing.T) {
	_, srv := newProcEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	owner, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "work", Path: t.TempDir(), Default: true}}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProcess(ctx, api.ProcessStartParams{SessionID: owner.ID, Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: other.ID}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("another session sees the process before a grant: %v", err)
	}
	g, err := c.GrantProcess(ctx, api.ProcessGrantParams{ID: p.ID, SessionID: owner.ID, ToSessionID: other.ID, IdempotencyKey: "grant-1"})
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if g.ID != p.ID {
		t.Fatalf("grant answered process %s, want %s", g.ID, p.ID)
	}
	if _, err := c.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: other.ID}); err != nil {
		t.Fatalf("the granted session cannot see the process: %v", err)
	}
	if _, err := c.RevokeProcess(ctx, api.ProcessGrantParams{ID: p.ID, SessionID: owner.ID, ToSessionID: other.ID}); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := c.GetProcess(ctx, api.ProcessIDParams{ID: p.ID, SessionID: other.ID}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("the revoked session still sees the process: %v", err)
	}

	if _, err := c.WriteProcess(ctx, api.ProcessWriteParams{ID: p.ID, SessionID: owner.ID, Data: "through stdin\n", Close: true}); err != nil {
		t.Fatalf("write: %v", err)
	}
	aw, err := c.AwaitProcess(ctx, api.ProcessAwaitParams{ID: p.ID, SessionID: owner.ID, TimeoutMs: 10000})
	if err != nil || aw.TimedOut {
		t.Fatalf("await: %+v %v", aw, err)
	}
	out, err := c.ProcessOutput(ctx, api.ProcessOutputParams{ID: p.ID, SessionID: owner.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Data), "through stdin") {
		t.Fatalf("output %q: want what was written to stdin", out.Data)
	}
}
