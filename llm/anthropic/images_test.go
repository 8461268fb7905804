package anthropic_test

import (
	"encoding/json"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// A user message's images are image blocks with a base64 source after its
// text; a tool result's images are image blocks in the tool_result's
// content, after its text. An attachment that is not an image is refused
// before sending.
func TestRequestImages(t *testing.T) {
	var b sse
	b.messageStart(1, 0, 0).textBlock(0, "ok").messageEnd("end_turn", 1)
	s := newServer(t, reply{body: b.String()})
	p := newProvider(t, s)
	req := &llm.Request{
		Model: "claude-test",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "What is it?", Attachments: []llm.Attachment{{MediaType: "image/png", Data: []byte("PNG!")}}},
			{Role: llm.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "t1", Name: "shot", Arguments: "{}"}}},
			{Role: llm.RoleTool, ToolCallID: "t1", ToolName: "shot", Content: "a screenshot",
				Attachments: []llm.Attachment{{MediaType: "image/jpeg", Data: []byte("JPG1")}}},
			{Role: llm.RoleUser, Attachments: []llm.Attachment{{MediaType: "image/webp", Data: []byte("WEBP")}}},
		},
	}
	if r := collect(t.Context(), p, req); r.err != nil {
		t.Fatal(r.err)
	}
	got, _ := json.Marshal(s.request(t, 0)["messages"])
	want := `[` +
		`{"content":[{"text":"What is it?","type":"text"},` +
		`{"source":{"data":"UE5HIQ==","media_type":"image/png","type":"base64"},"type":"image"}],"role":"user"},` +
		`{"content":[{"id":"t1","input":{},"name":"shot","type":"tool_use"}],"role":"assistant"},` +
		`{"content":[{"content":[{"text":"a screenshot","type":"text"},` +
		`{"source":{"data":"SlBHMQ==","media_type":"image/jpeg","type":"base64"},"type":"image"}],"tool_use_id":"t1","type":"tool_result"},` +
		`{"source":{"data":"V0VCUA==","media_type":"image/webp","type":"base64"},"type":"image"}],"role":"user"}]`
	if string(got) != want {
		t.Errorf("messages =\n%s\nwant\n%s", got, want)
	}

	bad := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x",
		Attachments: []llm.Attachment{{MediaType: "application/pdf", Data: []byte("%PDF")}}}}}
	r := collect(t.Context(), p, bad)
	if e, ok := llm.AsError(r.err); !ok || e.Kind != llm.KindBadRequest {
		t.Errorf("a PDF attachment: err = %v, want bad_request", r.err)
	}
	if n := s.count(); n != 1 {
		t.Errorf("sent %d requests, want the refused one unsent", n)
	}
}
