package scripted_test

import (
	"context"
	"fmt"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/scripted"
)

func Example() {
	p, err := scripted.Parse("example.json", []byte(`{
		"steps": [
			{"text": "I'll write the file.",
			 "toolCalls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "{{input}}"}}]},
			{"text": "Done."}
		]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}

	// First request: no assistant message yet, so steps[0] answers.
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	var text string
	var call event.ToolCall
	for ev, err := range p.Stream(context.Background(), req) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
			return
		case ev.Text != "":
			text += ev.Text
		case ev.ToolCall != nil:
			call.ID += ev.ToolCall.ID
			call.Name += ev.ToolCall.Name
			call.Arguments += ev.ToolCall.Arguments
		case ev.Finish != nil:
			fmt.Printf("%q finish=%s\n", text, ev.Finish.Reason)
			fmt.Println(call.ID, call.Name, call.Arguments)
		}
	}

	// Second request: one assistant message, so steps[1] answers.
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: text, ToolCalls: []event.ToolCall{call}},
		llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: "ok"},
	)
	for ev, err := range p.Stream(context.Background(), req) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case ev.Text != "":
			fmt.Printf("text %q\n", ev.Text)
		case ev.Finish != nil:
			fmt.Println("finish", ev.Finish.Reason)
		}
	}

	// Third request: the script has run out.
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: "Done."})
	for _, err := range p.Stream(context.Background(), req) {
		if err != nil {
			fmt.Println("error:", err)
		}
	}
	// Output:
	// "I'll write the file." finish=tool_calls
	// call_0_0 write_file {"path":"hello.txt","content":"hi"}
	// text "Done."
	// finish stop
	// error: scripted: script: example.json: ran out of steps: the request has 2 assistant messages, so it needs steps[2], but the script has only 2 steps (set "loop": true to repeat them)
}
