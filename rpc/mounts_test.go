package rpc_test

import (
	"context"
	"errors"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// TestMountsOnTheWire drives env/list, env/mount and env/unmount through
// the Go client and checks their error codes.
func TestMountsOnTheWire(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx := context.Background()
	names := map[string]bool{}
	for _, m := range e.s.Methods() {
		names[m.Name] = true
	}
	for _, want := range []string{"env/list", "env/mount", "env/unmount"} {
		if !names[want] {
			t.Errorf("method %s is not registered", want)
		}
	}

	s, err := c.CreateSession(ctx, api.CreateSessionParams{Mounts: []event.Mount{{ID: "local", Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	p := api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "data", Path: t.TempDir(), Mode: event.ModeReadOnly}, ExpectedBindingVersion: &one, IdempotencyKey: "k1"}
	r, err := c.Mount(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Applied || r.BindingVersion != 2 || r.Mount.ID != "data" || r.EventCursor == 0 {
		t.Fatalf("mount: %+v", r)
	}
	again, err := c.Mount(ctx, p)
	if err != nil || again.Applied || again.EventCursor != r.EventCursor || again.OperationID != r.OperationID {
		t.Fatalf("replay: %+v %v", again, err)
	}
	l, err := c.ListEnv(ctx, api.ListEnvParams{SessionID: s.ID})
	if err != nil || l.BindingVersion != 2 || len(l.Mounts) != 2 || l.DefaultMountID != "local" || l.LatestEnvironmentCursor != r.EventCursor {
		t.Fatalf("env/list: %+v %v", l, err)
	}

	other := p
	other.Mount.ID = "other"
	cases := []struct {
		name string
		code int
		call func() error
		data func(*api.Error) bool
	}{
		{"reused key", -32012, func() error { _, err := c.Mount(ctx, other); return err }, nil},
		{"existing id", -32011, func() error {
			_, err := c.Mount(ctx, api.MountParams{SessionID: s.ID, Mount: event.Mount{ID: "data", Path: t.TempDir()}})
			return err
		}, func(e *api.Error) bool { return e.Data["mountId"] == "data" }},
		{"stale version", -32013, func() error {
			_, err := c.Unmount(ctx, api.UnmountParams{SessionID: s.ID, MountID: "data", ExpectedBindingVersion: &one})
			return err
		}, func(e *api.Error) bool {
			return e.Data["expectedBindingVersion"] == float64(1) && e.Data["bindingVersion"] == float64(2)
		}},
		{"default without a successor", -32602, func() error {
			_, err := c.Unmount(ctx, api.UnmountParams{SessionID: s.ID, MountID: "local"})
			return err
		}, nil},
		{"unknown field", -32602, func() error {
			return c.Call(ctx, "env/list", map[string]any{"sessionId": s.ID, "extra": 1}, nil)
		}, nil},
		{"unknown session", -32010, func() error { _, err := c.ListEnv(ctx, api.ListEnvParams{SessionID: "ses_nope"}); return err }, nil},
	}
	for _, tc := range cases {
		err := tc.call()
		var re *api.Error
		if !errors.As(err, &re) || re.Code != tc.code {
			t.Errorf("%s: got %v, want %d", tc.name, err, tc.code)
			continue
		}
		if tc.data != nil && !tc.data(re) {
			t.Errorf("%s: data %v", tc.name, re.Data)
		}
	}

	u, err := c.Unmount(ctx, api.UnmountParams{SessionID: s.ID, MountID: "local", NewDefaultMountID: "data"})
	if err != nil || u.BindingVersion != 3 || u.CurrentDefaultMountID != "data" || u.RemovedMount.ID != "local" || u.CurrentDefaultShellMountID != "" {
		t.Fatalf("unmount: %+v %v", u, err)
	}
}
