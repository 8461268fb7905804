package openai

import (
	"encoding/json"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// imageRequest is a conversation with an image in the user's message and
// two in the results of the first of two tool calls.
func imageRequest() *llm.Request {
	return &llm.Request{
		Model: "m",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "What is in the picture?", Attachments: []llm.Attachment{{MediaType: "image/png", Data: []byte("PNG!")}}},
			{Role: llm.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "call_1", Name: "shot", Arguments: "{}"}, {ID: "call_2", Name: "ls", Arguments: "{}"}}},
			{Role: llm.RoleTool, ToolCallID: "call_1", ToolName: "shot", Content: "two screenshots",
				Attachments: []llm.Attachment{{MediaType: "image/jpeg", Data: []byte("JPG1")}, {MediaType: "image/webp", Data: []byte("WEBP")}}},
			{Role: llm.RoleTool, ToolCallID: "call_2", ToolName: "ls", Content: "a.txt"},
			{Role: llm.RoleUser, Content: "Images only:", Attachments: []llm.Attachment{{MediaType: "image/gif", Data: []byte("GIF8")}}},
		},
	}
}

// Chat Completions: a user message's images are image_url parts with a
// data URL after its text part; a tool message carries text only, so the
// images of a tool result come in a user message after the run of tool
// messages, naming the call.
func TestChatImages(t *testing.T) {
	s := newServer(t, reply{parts: []string{textChunk("ok"), chunk(`{}`, "stop"), chatDone}})
	p, err := NewChat(s.config())
	if err != nil {
		t.Fatal(err)
	}
	req := imageRequest()
	checkBody(t, p, req) // the fast encoder agrees with the SDK's
	if r := collect(t, p.Stream(ctxT(t), req)); r.err != nil {
		t.Fatal(r.err)
	}
	var body struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(s.requests()[0].raw, &body); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, "messages", body.Messages, `[
		{"role":"user","content":[{"type":"text","text":"What is in the picture?"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,UE5HIQ=="}}]},
		{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"shot","arguments":"{}"}},
			{"id":"call_2","type":"function","function":{"name":"ls","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"two screenshots"},
		{"role":"tool","tool_call_id":"call_2","content":"a.txt"},
		{"role":"user","content":[{"type":"text","text":"Images returned by tool calls: 2 from call_1 (shot);"},
			{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,SlBHMQ=="}},
			{"type":"image_url","image_url":{"url":"data:image/webp;base64,V0VCUA=="}}]},
		{"role":"user","content":[{"type":"text","text":"Images only:"},
			{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lGOA=="}}]}]`)

	// An attachment that is not an image is refused before sending.
	bad := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x", Attachments: []llm.Attachment{{MediaType: "application/pdf", Data: []byte("%PDF")}}}}}
	r := collect(t, p.Stream(ctxT(t), bad))
	wantError(t, r.err, ChatProviderName, llm.KindBadRequest, false)
	if n := len(s.requests()); n != 1 {
		t.Errorf("%d requests, want the refused one unsent", n)
	}
}

// Responses: a user message's images are input_image items with a data
// URL; a function_call_output with images is a list of input_text and
// input_image items.
func TestResponsesImages(t *testing.T) {
	s := newServer(t, reply{parts: []string{respCreated(), textDelta("ok"), respCompleted()}})
	p := newResponses(t, s)
	if r := collect(t, p.Stream(ctxT(t), imageRequest())); r.err != nil {
		t.Fatal(r.err)
	}
	var body struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(s.requests()[0].raw, &body); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, "input", body.Input, `[
		{"role":"user","content":[{"type":"input_text","text":"What is in the picture?"},
			{"type":"input_image","detail":"auto","image_url":"data:image/png;base64,UE5HIQ=="}]},
		{"type":"function_call","call_id":"call_1","name":"shot","arguments":"{}"},
		{"type":"function_call","call_id":"call_2","name":"ls","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"two screenshots"},
			{"type":"input_image","detail":"auto","image_url":"data:image/jpeg;base64,SlBHMQ=="},
			{"type":"input_image","detail":"auto","image_url":"data:image/webp;base64,V0VCUA=="}]},
		{"type":"function_call_output","call_id":"call_2","output":"a.txt"},
		{"role":"user","content":[{"type":"input_text","text":"Images only:"},
			{"type":"input_image","detail":"auto","image_url":"data:image/gif;base64,R0lGOA=="}]}]`)
}
