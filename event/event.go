// Package event defines the envelope of weft's append-only session log, the
// event types, and the typed data each type carries.
//
// Every session has one log. Its events carry a gap-free sequence number
// starting at 1; a cursor is the seq of the last event a client holds, and
// reading "after N" yields N+1 onward. The log holds the type plus raw JSON
// data; the Data* structs and [Decode] give typed access.
package event

import (
	"encoding/json"
	"fmt"
	"time"
)

// Type names an event kind. Types are dotted nouns and verbs.
type Type string

// Event is one entry of a session's log, exactly as stored.
type Event struct {
	// Seq is the event's position in its session's log, from 1, gap-free.
	Seq int64 `json:"seq"`
	// SessionID names the session whose log holds the event.
	SessionID string `json:"sessionId"`
	// RunID names the run the event belongs to; empty for session-level events.
	RunID string `json:"runId,omitempty"`
	// Type is the event kind.
	Type Type `json:"type"`
	// Time is when the event was appended, in UTC.
	Time time.Time `json:"time"`
	// Data is the type's payload as JSON; see the Data* types.
	Data json.RawMessage `json:"data"`
}

// Encoded is an event together with its JSON encoding, as
// [Event.AppendJSON] makes it: what a transport writes. The subscribers
// of a session share the encoding of each live event, so an event is
// encoded once however many clients receive it. JSON is read-only, and
// nil when the producer left the encoding to the consumer (a replayed
// event, which no other subscriber shares): use [Encoded.Bytes], or write
// [Event.AppendJSONHead], [Event.JSONData] and "}" without copying the
// data.
type Encoded struct {
	Event Event
	JSON  json.RawMessage
}

// Bytes returns the event's JSON encoding: the shared one, or a new one
// when JSON is nil.
func (e Encoded) Bytes() ([]byte, error) {
	if e.JSON != nil {
		return e.JSON, nil
	}
	return e.Event.AppendJSON(nil)
}

// Decode unmarshals e.Data into v, naming the event on failure.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("event %s seq %d (%s): %w", e.SessionID, e.Seq, e.Type, err)
	}
	return nil
}

// New builds an unsequenced event of type t for run runID with data
// marshalled from v. The session owner assigns Seq, SessionID and Time when
// it appends the event.
func New(runID string, t Type, v any) (Event, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Event{}, fmt.Errorf("marshal %s data: %w", t, err)
	}
	return Event{RunID: runID, Type: t, Data: b}, nil
}

// IsTerminalRun reports whether t ends a run.
func IsTerminalRun(t Type) bool {
	switch t {
	case RunCompleted, RunFailed, RunCancelled, RunInterrupted:
		return true
	}
	return false
}
