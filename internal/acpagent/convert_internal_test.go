package acpagent

import (
	"errors"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// TestStopReasons maps each way a run ends onto the prompt's answer.
func TestStopReasons(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  runEnd
		want acp.StopReason
		code int
	}{
		{"completed", runEnd{typ: event.RunCompleted, finish: llm.FinishStop}, acp.StopReasonEndTurn, 0},
		{"token limit", runEnd{typ: event.RunCompleted, finish: llm.FinishLength}, acp.StopReasonMaxTokens, 0},
		{"cancelled", runEnd{typ: event.RunCancelled}, acp.StopReasonCancelled, 0},
		{"step limit", runEnd{typ: event.RunFailed, data: event.RunEndedData{Error: &event.Error{Kind: "max_steps", Message: "limit"}}}, acp.StopReasonMaxTurnRequests, 0},
		{"failed", runEnd{typ: event.RunFailed, data: event.RunEndedData{Error: &event.Error{Kind: "model", Message: "502 from the provider"}}}, "", -32603},
		{"interrupted", runEnd{typ: event.RunInterrupted}, "", -32603},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.end.response()
			if tc.code != 0 {
				var re *acp.RequestError
				if !errors.As(err, &re) || re.Code != tc.code {
					t.Fatalf("error = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil || res.StopReason != tc.want {
				t.Errorf("response = %+v, %v; want %q", res, err, tc.want)
			}
		})
	}
}

// TestWireError keeps a weft error's code and kind.
func TestWireError(t *testing.T) {
	err := wireError(api.Errorf(api.KindNotFound, "session ses_x not found"))
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32010 || re.Data.(map[string]any)["kind"] != api.KindNotFound {
		t.Errorf("wireError = %#v", err)
	}
	if err := wireError(errors.New("boom")); !errors.As(err, &re) || re.Code != -32603 {
		t.Errorf("wireError(plain) = %#v", err)
	}
}

// TestPromptInput reads text, links and embedded text resources, and
// refuses the rest.
func TestPromptInput(t *testing.T) {
	in, err := promptInput([]acp.ContentBlock{
		acp.TextBlock("look at "),
		acp.ResourceLinkBlock("main.go", "file:///w/main.go"),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///w/a.txt", Text: "A"}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "look at [main.go](file:///w/main.go)\n<context uri=\"file:///w/a.txt\">\nA\n</context>\n"
	if got := event.Text(in); got != want {
		t.Errorf("input = %q, want %q", got, want)
	}
	for _, bad := range [][]acp.ContentBlock{nil, {acp.TextBlock(" \n")}, {acp.AudioBlock("aGk=", "audio/wav")}} {
		if _, err := promptInput(bad); err == nil {
			t.Errorf("promptInput(%v) accepted", bad)
		}
	}
}

// TestAlwaysName names the scope an "allow always" answer adds.
func TestAlwaysName(t *testing.T) {
	for _, tc := range []struct {
		rule *event.Rule
		want string
	}{
		{nil, "Always allow in this session"},
		{&event.Rule{Tool: "shell", Match: []byte(`{"commandExact":"go test ./..."}`)}, "Always allow `go test ./...` in this session"},
		{&event.Rule{Tool: "write_file", Match: []byte(`{"mount":"work"}`)}, "Always allow write_file in mount work for this session"},
		{&event.Rule{Tool: "mcp__gh__create_issue"}, "Always allow mcp__gh__create_issue in this session"},
	} {
		if got := alwaysName(event.ApprovalRequestedData{SessionRule: tc.rule}); got != tc.want {
			t.Errorf("alwaysName(%+v) = %q, want %q", tc.rule, got, tc.want)
		}
	}
}
