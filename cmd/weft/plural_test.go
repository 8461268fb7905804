package main

import (
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
)

// TestCallSummaryBytes: a write's size reads "1 byte", not "1 bytes".
func TestCallSummaryBytes(t *testing.T) {
	for content, want := range map[string]string{"": "a.txt (0 bytes)", "x": "a.txt (1 byte)", "xy": "a.txt (2 bytes)"} {
		c := event.ToolCall{Name: api.ToolWriteFile, Arguments: `{"path":"a.txt","content":"` + content + `"}`}
		if got := callSummary(c); got != want {
			t.Errorf("callSummary(%q) = %q, want %q", content, got, want)
		}
	}
	if got := countOf(int64(1), "byte") + ", " + countOf(int64(3), "byte"); got != "1 byte, 3 bytes" {
		t.Errorf("countOf: %q", got)
	}
}
