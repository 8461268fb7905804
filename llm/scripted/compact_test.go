package scripted_test

import (
	"context"
	"strings"
	"testing"

	"weft.dev/weft/llm"
)

// TestSummaryRequest: a summary request is answered from the script's
// summary template with the mark of the turns it covers, and a request
// that starts from that summary goes on with the next step.
func TestSummaryRequest(t *testing.T) {
	p := parse(t, `{"contextWindow":1000,"summary":"So far: {{input}} ({{turn}} turns)","steps":[
		{"text":"one"},{"text":"two"},{"text":"three after {{input}}","usage":{"inputTokens":900,"outputTokens":5}}]}`)
	if p.ContextWindow() != 1000 {
		t.Fatalf("contextWindow %d", p.ContextWindow())
	}
	ctx := context.Background()
	req := request(user("a"), assistant("one"), user("b"), assistant("two"), user("summarise"))
	req.Purpose = llm.PurposeSummary
	r := collect(ctx, p, req)
	if r.err != nil || !strings.HasPrefix(r.text, "So far: b (2 turns)") || !strings.Contains(r.text, "[scripted summary of 2 turns]") {
		t.Fatalf("summary %q, %v", r.text, r.err)
	}
	r = collect(ctx, p, request(user("[The conversation before this point was compacted]\n"+r.text)))
	if r.err != nil || !strings.HasPrefix(r.text, "three after") {
		t.Fatalf("after the summary: %q, %v; want steps[2]", r.text, r.err)
	}
	if r.usage == nil || r.usage.InputTokens != 900 || r.usage.OutputTokens != 5 {
		t.Fatalf("scripted usage %+v", r.usage)
	}
}

// TestContextOverflowError: a script can make a step overflow the window.
func TestContextOverflowError(t *testing.T) {
	p := parse(t, `{"steps":[{"text":"x","error":{"kind":"context_overflow","status":400,"times":1}}]}`)
	r := collect(context.Background(), p, request(user("a")))
	wantKind(t, r.err, llm.KindContextOverflow, false)
}
