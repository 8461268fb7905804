package gemini_test

import (
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// A user message's images are inlineData parts (MIME type, base64 bytes)
// after its text; the images of tool results follow the functionResponse
// parts of their run, in the same user content. An attachment that is
// not an image is refused before sending.
func TestRequestImages(t *testing.T) {
	s := newServer(t, reply{body: fixture(t, "text.sse")})
	p := newProvider(t, s)
	req := &llm.Request{
		Model: "gemini-2.5-flash",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "What is it?", Attachments: []llm.Attachment{{MediaType: "image/png", Data: []byte("PNG!")}}},
			{Role: llm.RoleAssistant, ToolCalls: []event.ToolCall{{ID: "c1", Name: "shot", Arguments: "{}"}, {ID: "c2", Name: "ls", Arguments: "{}"}}},
			{Role: llm.RoleTool, ToolCallID: "c1", ToolName: "shot", Content: "a screenshot",
				Attachments: []llm.Attachment{{MediaType: "image/jpeg", Data: []byte("JPG1")}}},
			{Role: llm.RoleTool, ToolCallID: "c2", ToolName: "ls", Content: "a.txt"},
			{Role: llm.RoleAssistant, Content: "Done."},
			{Role: llm.RoleUser, Attachments: []llm.Attachment{{MediaType: "image/gif", Data: []byte("GIF8")}}},
		},
	}
	if r := collect(t, t.Context(), p, req); r.err != nil {
		t.Fatal(r.err)
	}
	got := mustJSON(t, s.request(t, 0).json(t)["contents"])
	want := `[` +
		`{"parts":[{"text":"What is it?"},{"inlineData":{"data":"UE5HIQ==","mimeType":"image/png"}}],"role":"user"},` +
		`{"parts":[{"functionCall":{"id":"c1","name":"shot"}},{"functionCall":{"id":"c2","name":"ls"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"id":"c1","name":"shot","response":{"output":"a screenshot"}}},` +
		`{"functionResponse":{"id":"c2","name":"ls","response":{"output":"a.txt"}}},` +
		`{"inlineData":{"data":"SlBHMQ==","mimeType":"image/jpeg"}}],"role":"user"},` +
		`{"parts":[{"text":"Done."}],"role":"model"},` +
		`{"parts":[{"inlineData":{"data":"R0lGOA==","mimeType":"image/gif"}}],"role":"user"}]`
	if got != want {
		t.Errorf("contents =\n%s\nwant\n%s", got, want)
	}

	bad := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x",
		Attachments: []llm.Attachment{{MediaType: "application/pdf", Data: []byte("%PDF")}}}}}
	r := collect(t, t.Context(), p, bad)
	if e, ok := llm.AsError(r.err); !ok || e.Kind != llm.KindBadRequest {
		t.Errorf("a PDF attachment: err = %v, want bad_request", r.err)
	}
	if n := s.count(); n != 1 {
		t.Errorf("sent %d requests, want the refused one unsent", n)
	}
}
