package api_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// The params of a method are plain structs that encode to the wire's
// JSON: here run/start's, as a client sends them. Input is text parts;
// the host also accepts a plain string.
func Example() {
	p := api.StartRunParams{
		SessionID:      "ses_1",
		Input:          api.Input(event.TextParts("Summarise README.md")),
		Busy:           api.BusyQueue,
		IdempotencyKey: "retry-me-safely",
	}
	b, _ := json.Marshal(p)
	fmt.Println(string(b))

	var q api.StartRunParams
	if err := json.Unmarshal([]byte(`{"sessionId":"ses_1","input":"hello"}`), &q); err != nil {
		fmt.Println(err)
	}
	fmt.Println(len(q.Input), q.Input[0].Type, q.Input[0].Text)
	// Output:
	// {"sessionId":"ses_1","input":[{"type":"text","text":"Summarise README.md"}],"busy":"queue","idempotencyKey":"retry-me-safely"}
	// 1 text hello
}

// A host's errors are *api.Error values of a kind from the error table.
// Callers branch on the kind with errors.Is against the sentinels, the
// same in process and after the error has crossed the wire.
func ExampleError() {
	err := api.Errorf(api.KindNotFound, "session %s", "ses_9")
	fmt.Println(err, err.Code, err.Retryable, errors.Is(err, api.ErrNotFound))

	wire, _ := json.Marshal(err)
	fmt.Println(string(wire))

	var got api.Error // what a client decodes from the response
	if err := json.Unmarshal(wire, &got); err != nil {
		fmt.Println(err)
	}
	fmt.Println(errors.Is(&got, api.ErrNotFound), errors.Is(&got, api.ErrRunConflict))
	// Output:
	// session ses_9 (-32010 not_found) -32010 false true
	// {"code":-32010,"message":"session ses_9","data":{"kind":"not_found","retryable":false}}
	// true false
}

// A process handle arrives in a tool result or a client's params as
// JSON; ParseHandle reads it strictly, and every malformed handle's error
// wraps ErrBadHandle.
func ExampleParseHandle() {
	h, err := api.ParseHandle(json.RawMessage(`{"__handle__":"process","id":"proc_1"}`))
	fmt.Println(h.ID, err)

	for _, raw := range []string{`"proc_1"`, `{"id":"proc_1"}`, `{"__handle__":"session","id":"ses_1"}`} {
		_, err := api.ParseHandle(json.RawMessage(raw))
		fmt.Println(errors.Is(err, api.ErrBadHandle), err)
	}
	// Output:
	// proc_1 <nil>
	// true bad process handle: not a JSON object: got "proc_1"
	// true bad process handle: missing "__handle__" in {"id":"proc_1"}; want {"__handle__":"process","id":"…"}
	// true bad process handle: not a process handle: "__handle__" is "session", want "process"
}
