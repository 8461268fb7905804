package event_test

import (
	"encoding/json"
	"fmt"

	"weft.dev/weft/event"
)

// A client reads the log as events (from events/read, a subscription, SSE
// or `weft run --json`) and decodes the data of the types it cares about
// into their Data structs.
func Example() {
	log := []string{
		`{"seq":3,"sessionId":"ses_1","runId":"run_1","type":"run.started","time":"2025-06-01T12:00:00Z","data":{}}`,
		`{"seq":4,"sessionId":"ses_1","runId":"run_1","type":"message.delta","time":"2025-06-01T12:00:01Z","data":{"step":1,"text":"Hel"}}`,
		`{"seq":5,"sessionId":"ses_1","runId":"run_1","type":"message.completed","time":"2025-06-01T12:00:01Z","data":{"step":1,"text":"Hello!","finishReason":"stop"}}`,
		`{"seq":6,"sessionId":"ses_1","runId":"run_1","type":"run.completed","time":"2025-06-01T12:00:02Z","data":{}}`,
	}
	cursor := int64(0)
	for _, line := range log {
		var e event.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			fmt.Println(err)
			return
		}
		cursor = e.Seq // resume after it: events/read {after: cursor}
		switch {
		case e.Type == event.MessageCompleted:
			var d event.MessageCompletedData
			if err := e.Decode(&d); err != nil {
				fmt.Println(err)
			}
			fmt.Printf("answer of step %d: %q\n", d.Step, d.Text)
		case event.IsTerminalRun(e.Type):
			fmt.Println("run", e.RunID, "ended:", e.Type)
		}
	}
	fmt.Println("cursor", cursor)
	// Output:
	// answer of step 1: "Hello!"
	// run run_1 ended: run.completed
	// cursor 6
}

// New makes an event with typed data; the session's owner gives it its
// seq, session and time when it appends it.
func ExampleNew() {
	e, err := event.New("run_1", event.MessageUser, event.MessageUserData{Content: event.TextParts("hi")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Type, e.RunID, string(e.Data), e.Seq)
	fmt.Println(event.Text(event.TextParts("hi")))
	// Output:
	// message.user run_1 {"content":[{"type":"text","text":"hi"}]} 0
	// hi
}
