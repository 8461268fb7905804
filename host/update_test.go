package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// TestUpdateSession: session/update renames a session and changes the
// model of its later runs, appending session.updated with only what
// changes; a retry with the same key replays, the same key with other
// params conflicts, and bad params are refused with the field named.
func TestUpdateSession(t *testing.T) {
	h, st := newHost(t)
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")

	s, err := h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Title: ptr("renamed"), IdempotencyKey: "u1"})
	if err != nil || s.Title != "renamed" || s.Model != "scripted:fast" || s.Replayed {
		t.Fatalf("rename: %+v, %v", s, err)
	}
	if got, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: sid}); got.Title != "renamed" {
		t.Fatalf("session/get after the rename: %q", got.Title)
	}
	again, err := h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Title: ptr("renamed"), IdempotencyKey: "u1"})
	if err != nil || !again.Replayed || again.Title != "renamed" {
		t.Fatalf("retry: %+v, %v", again, err)
	}
	if _, err := h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Title: ptr("other"), IdempotencyKey: "u1"}); !errors.Is(err, api.ErrIdempotencyConflict) {
		t.Fatalf("same key, other title: %v", err)
	}
	if _, err := st.Receipt(ctx, "u1", api.MethodSessionUpdate); err != nil {
		t.Fatalf("the receipt: %v", err)
	}

	// The model of the next run; the title stays.
	s, err = h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Model: ptr("scripted:ticks")})
	if err != nil || s.Model != "scripted:ticks" || s.Title != "renamed" {
		t.Fatalf("change the model: %+v, %v", s, err)
	}
	r := start(t, h, api.StartRunParams{SessionID: sid, Input: input("x")})
	wait(t, h, r.ID)
	var started event.RunStartedData
	if err := waitFor(t, h, sid, r.ID, ofType(event.RunStarted)).Decode(&started); err != nil || started.Model != "scripted:ticks" {
		t.Fatalf("the next run started with model %q (%v)", started.Model, err)
	}

	// A change to nothing appends nothing.
	before, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: sid})
	if _, err := h.UpdateSession(ctx, api.UpdateSessionParams{SessionID: sid, Title: ptr("renamed"), Model: ptr("scripted:ticks")}); err != nil {
		t.Fatal(err)
	}
	if after, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: sid}); after.LastSeq != before.LastSeq {
		t.Fatalf("an update that changes nothing appended %d events", after.LastSeq-before.LastSeq)
	}

	// The log holds one session.updated per change, with only what changed.
	page, err := h.ReadEvents(ctx, api.ReadEventsParams{SessionID: sid, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var updates []string
	for _, e := range page.Events {
		if e.Type == event.SessionUpdated {
			updates = append(updates, string(e.Data))
		}
	}
	if want := []string{`{"title":"renamed"}`, `{"model":"scripted:ticks"}`}; strings.Join(updates, " ") != strings.Join(want, " ") {
		t.Fatalf("session.updated events: %v, want %v", updates, want)
	}
}

// TestUpdateSessionBadInput: every bad update is a typed error naming
// its field; an unknown or deleted session is not found.
func TestUpdateSessionBadInput(t *testing.T) {
	h, _ := newHost(t)
	ctx := context.Background()
	sid := session(t, h, "scripted:fast")
	deleted := session(t, h, "scripted:fast")
	if _, err := h.DeleteSession(ctx, api.SessionIDParams{SessionID: deleted}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		p     api.UpdateSessionParams
		err   error
		field string
	}{
		{"no session", api.UpdateSessionParams{Title: ptr("x")}, api.ErrInvalidParams, "sessionId"},
		{"nothing to change", api.UpdateSessionParams{SessionID: sid}, api.ErrInvalidParams, "title"},
		{"long title", api.UpdateSessionParams{SessionID: sid, Title: ptr(strings.Repeat("t", api.MaxTitleBytes+1))}, api.ErrInvalidParams, "title"},
		{"long model", api.UpdateSessionParams{SessionID: sid, Model: ptr("scripted:" + strings.Repeat("m", api.MaxModelBytes))}, api.ErrInvalidParams, "model"},
		{"unknown model", api.UpdateSessionParams{SessionID: sid, Model: ptr("nope:x")}, api.ErrInvalidParams, "model"},
		{"unknown session", api.UpdateSessionParams{SessionID: "ses_nope", Title: ptr("x")}, api.ErrNotFound, ""},
		{"deleted session", api.UpdateSessionParams{SessionID: deleted, Title: ptr("x")}, api.ErrNotFound, ""},
		{"long key", api.UpdateSessionParams{SessionID: sid, Title: ptr("x"), IdempotencyKey: strings.Repeat("k", api.MaxIDBytes+1)}, api.ErrInvalidParams, "idempotencyKey"},
	}
	for _, c := range cases {
		_, err := h.UpdateSession(ctx, c.p)
		var ae *api.Error
		if !errors.Is(err, c.err) || !errors.As(err, &ae) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.err)
			continue
		}
		if f, _ := ae.Data["field"].(string); f != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, f, c.field, err)
		}
		if c.field == "title" && strings.Contains(c.name, "long") && ae.Data["limit"] != api.MaxTitleBytes {
			t.Errorf("%s: limit %v", c.name, ae.Data["limit"])
		}
	}
	if s, _ := h.GetSession(ctx, api.SessionGetParams{SessionID: sid}); s.Title != "" || s.Model != "scripted:fast" {
		t.Fatalf("a refused update changed the session: %+v", s)
	}
}
