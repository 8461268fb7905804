package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
	"weft.dev/weft/host"
	"weft.dev/weft/llm/scripted"
	"weft.dev/weft/rpc"
	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
)

// TestPrunedSessionNotFound: over JSON-RPC, session/prune purges an
// ended session: a subscriber's stream ends, and every method then
// answers for the session with not_found (-32010).
func TestPrunedSessionNotFound(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{
		Store: memory.New(), DefaultModel: "fast", CoalesceWindow: 2 * time.Millisecond,
		Retention: host.Retention{Policy: store.Retention{MaxAge: time.Nanosecond}, Interval: -1},
		ResolveModel: func(name string) (*host.Model, error) {
			src, ok := hostScripts[name]
			if !ok {
				return nil, fmt.Errorf("unknown model %q", name)
			}
			p, err := scripted.Parse(name, []byte(src))
			return &host.Model{Name: name, Provider: p, Model: name}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewHostServer(h, rpc.HostConfig{Config: rpc.Config{Token: token}})
	srv := httptest.NewServer(rpc.HTTPHandler(s, h, rpc.SSEOptions{Heartbeat: 50 * time.Millisecond}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		s.Close()
		srv.Close()
		h.Close()
	})
	c, err := client.Dial(ctx, srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ses, err := c.CreateSession(ctx, api.CreateSessionParams{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.StartRun(ctx, api.StartRunParams{SessionID: ses.ID, Input: api.Input(event.TextParts("hi"))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRun(ctx, api.WaitRunParams{RunID: run.ID, TimeoutMs: 10000}); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: ses.ID})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for range sub {
		}
	}()

	res, err := c.PruneSessions(ctx, api.PruneParams{DryRun: true})
	if err != nil || res.PurgedCount != 1 || res.Purged[0].SessionID != ses.ID || res.Purged[0].Reason != store.ReasonAge {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	if _, err := c.GetSession(ctx, api.SessionGetParams{SessionID: ses.ID}); err != nil {
		t.Fatalf("a dry run purged the session: %v", err)
	}
	if res, err = c.PruneSessions(ctx, api.PruneParams{}); err != nil || res.PurgedCount != 1 {
		t.Fatalf("prune: %+v, %v", res, err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription to the purged session did not end")
	}
	for name, call := range map[string]func() error{
		"session/get": func() error {
			_, err := c.GetSession(ctx, api.SessionGetParams{SessionID: ses.ID})
			return err
		},
		"events/read": func() error {
			_, err := c.ReadEvents(ctx, api.ReadEventsParams{SessionID: ses.ID})
			return err
		},
		"run/get": func() error { _, err := c.GetRun(ctx, api.RunIDParams{RunID: run.ID}); return err },
		"run/start": func() error {
			_, err := c.StartRun(ctx, api.StartRunParams{SessionID: ses.ID, Input: api.Input(event.TextParts("again"))})
			return err
		},
		"events/subscribe": func() error {
			_, err := c.Subscribe(ctx, api.SubscribeParams{SessionID: ses.ID})
			return err
		},
	} {
		var ae *api.Error
		if err := call(); !errors.As(err, &ae) || ae.Kind != api.KindNotFound {
			t.Errorf("%s of a purged session: %v, want not_found", name, err)
		}
	}
}
