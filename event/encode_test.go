package event_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/event"
)

// AppendJSON is json.Marshal's encoding, byte for byte, for data as the
// stores keep it (compact, escaped by json.Marshal), and on one line
// decoding to the same value otherwise.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 4, 5, 67890, time.UTC)
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("z<&>\u2028", 50000)})
	for _, e := range []event.Event{
		{Seq: 1, SessionID: "ses_1", Type: event.SessionCreated, Time: at, Data: json.RawMessage(`{"title":"x"}`)},
		{Seq: 2, SessionID: "ses_1", RunID: "run_1", Type: event.MessageDelta, Time: at.Truncate(time.Second), Data: big},
		{Seq: 3, SessionID: "odd \"<id>\" & \x01 é \u2028", RunID: "r\\1", Type: "type.<x>", Time: at},
		{Seq: 1 << 40, SessionID: "s", Type: "t", Time: at, Data: json.RawMessage(`null`)},
		{Seq: 5, SessionID: "s", Type: "t", Time: at, Data: json.RawMessage("{\n  \"a\": [1, 2],\r\n  \"b\": \"c d\"\n}")},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.AppendJSON([]byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[6:], want) {
			t.Errorf("seq %d:\n got %.200s\nwant %.200s", e.Seq, got[6:], want)
		}
		enc, err := event.Encoded{Event: e}.Bytes()
		if err != nil || !bytes.Equal(enc, want) {
			t.Errorf("seq %d: Encoded.Bytes differs from json.Marshal (%v)", e.Seq, err)
		}
	}
	// Data that is valid but not compact (as PostgreSQL's jsonb returns
	// it) is kept as it is: the same value, on one line.
	e := event.Event{Seq: 6, SessionID: "s", Type: "t", Time: at, Data: json.RawMessage(`{"a": 1, "b": [2, 3]}`)}
	got, err := e.AppendJSON(nil)
	if err != nil || bytes.ContainsAny(got, "\r\n") {
		t.Fatalf("%s, %v", got, err)
	}
	var back event.Event
	if err := json.Unmarshal(got, &back); err != nil || back.Seq != 6 || !json.Valid(back.Data) {
		t.Fatalf("%s does not decode to the event: %v", got, err)
	}
}

// BenchmarkEncodeBigEvent compares json.Marshal with AppendJSON for an
// event of 200 KiB, the size of the events in issue 17's stalled-reader
// attack.
func BenchmarkEncodeBigEvent(b *testing.B) {
	data, _ := json.Marshal(map[string]string{"text": strings.Repeat("z", 200<<10)})
	e := event.Event{Seq: 1, SessionID: "ses_1", RunID: "run_1", Type: event.MessageUser, Time: time.Now().UTC(), Data: data}
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = e.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
