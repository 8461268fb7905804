package rpc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/jsonrpc"
)

// An events/event notification built from an event's shared encoding is
// byte for byte the one encoding the notification gives, escapes
// included; one built from a replayed event (data as stored, neither
// compacted nor escaped again) is on one line and decodes to the same
// notification.
func TestEventFrameIsTheNotification(t *testing.T) {
	events := []event.Event{
		{Seq: 1, SessionID: "ses_1", Type: event.SessionCreated, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Data: json.RawMessage(`{}`)},
		{Seq: 22, SessionID: "ses_1", RunID: "run_1", Type: event.MessageDelta, Time: time.Now().UTC(),
			Data: json.RawMessage(`{"step":1,"text":"<b>&amp;</b> \u2028 ünïcode \"q\" \\ \n"}`)},
		{Seq: 3, SessionID: "ses_x", Type: event.RunQueued, Data: json.RawMessage(` { "model" : "m" } `)},
	}
	for _, id := range []string{"sub_1", "sub_<&>\"", ""} {
		prefix := eventFramePrefix(id)
		for _, e := range events {
			enc, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			params, err := json.Marshal(api.EventNotification{SubscriptionID: id, Event: e})
			if err != nil {
				t.Fatal(err)
			}
			want := jsonrpc.AppendRequest(nil, nil, api.NotifyEvent, params)
			if got, err := eventFrame(prefix, event.Encoded{Event: e, JSON: enc}); err != nil || string(got) != string(want) {
				t.Errorf("subscription %q, seq %d:\n got %s\nwant %s (%v)", id, e.Seq, got, want, err)
			}
			got, err := eventFrame(prefix, event.Encoded{Event: e})
			if err != nil || strings.ContainsAny(string(got), "\r\n") {
				t.Fatalf("subscription %q, seq %d: %s, %v", id, e.Seq, got, err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("subscription %q, seq %d: %s: %v", id, e.Seq, got, err)
			}
			json.Unmarshal(want, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("subscription %q, seq %d, replayed:\n got %s\nwant %s", id, e.Seq, got, want)
			}
		}
	}
}
