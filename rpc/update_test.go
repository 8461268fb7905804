package rpc_test

import (
	"context"
	"strings"
	"testing"

	"weft.dev/weft/api"
)

func ptr[T any](v T) *T { return &v }

// session/update over the wire: a rename round-trips, and bad params
// are typed errors naming the field (and the limit), an unknown or
// deleted session -32010.
func TestUpdateSessionOverTheWire(t *testing.T) {
	e := newHostEnv(t)
	c := e.dial(t)
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Title: "first", Model: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: s.ID, Title: ptr("second")})
	if err != nil || got.Title != "second" || got.Model != "fast" {
		t.Fatalf("rename: %+v, %v", got, err)
	}
	if got, err = c.GetSession(ctx, api.SessionGetParams{SessionID: s.ID}); err != nil || got.Title != "second" {
		t.Fatalf("session/get after the rename: %+v, %v", got, err)
	}
	gone, _ := c.CreateSession(ctx, api.CreateSessionParams{})
	if _, err := c.DeleteSession(ctx, api.SessionIDParams{SessionID: gone.ID}); err != nil {
		t.Fatal(err)
	}

	_, err = c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: s.ID, Title: ptr(strings.Repeat("t", api.MaxTitleBytes+1))})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["field"] != "title" || e.Data["limit"] != float64(api.MaxTitleBytes) {
		t.Errorf("a long title: %v %v", e, e.Data)
	}
	_, err = c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: s.ID, Model: ptr(strings.Repeat("m", api.MaxModelBytes+1))})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["field"] != "model" || e.Data["limit"] != float64(api.MaxModelBytes) {
		t.Errorf("a long model: %v %v", e, e.Data)
	}
	_, err = c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: s.ID, Model: ptr("nope")})
	if e := wireErr(t, err, api.CodeInvalidParams); e.Data["field"] != "model" {
		t.Errorf("an unknown model: %v %v", e, e.Data)
	}
	_, err = c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: s.ID})
	wireErr(t, err, api.CodeInvalidParams)
	err = c.Call(ctx, api.MethodSessionUpdate, map[string]any{"sessionId": s.ID, "titel": "x"}, nil)
	wireErr(t, err, api.CodeInvalidParams)
	_, err = c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: "ses_nope", Title: ptr("x")})
	wireErr(t, err, api.CodeNotFound)
	_, err = c.UpdateSession(ctx, api.UpdateSessionParams{SessionID: gone.ID, Title: ptr("x")})
	wireErr(t, err, api.CodeNotFound)
}
