package rpc

import (
	"encoding/json"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/internal/jsonrpc"
)

// An events/event notification built from an event's shared encoding is
// byte for byte the one encoding the notification gives, escapes included.
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
			if got := eventFrame(prefix, enc); string(got) != string(want) {
				t.Errorf("subscription %q, seq %d:\n got %s\nwant %s", id, e.Seq, got, want)
			}
		}
	}
}
