package console_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsoleNewEventTypes: the page renders an MCP server's failure, a
// checkpoint, a compaction, a rewind and a fork as readable lines, not
// silence.
func TestConsoleNewEventTypes(t *testing.T) {
	h := newHost(t)
	// An MCP server that exits at once: the run's steps record its failure.
	cfg := filepath.Join(h.dir, "config", "weft")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"mcpServers": {"broken": {"command": "false"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h.start()
	model := h.script(map[string]any{"steps": []any{
		map[string]any{"text": "Writing.", "toolCalls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": "a.txt", "content": "hi"}}}},
		map[string]any{"text": "Written."},
	}})
	ctx := newTab(t)
	sid := loginAndCreate(t, ctx, h, "kinds", model)
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`#input`), "write it"+kb.Enter))
	waitJS(t, ctx, "the approval", `document.querySelector('#events .request.approval button[data-decision="allow_once"]')`, 10*time.Second)
	run(t, ctx, chromedp.Click(chromedp.CSS(`#events .request.approval button[data-decision="allow_once"]`)))
	waitJS(t, ctx, "the run's end", `document.querySelector("#events .runend.completed")`, 15*time.Second)
	waitJS(t, ctx, "the MCP failure line", `[...document.querySelectorAll("#events .meta.error .errtext")].some(e => e.textContent.startsWith("MCP server broken failed: "))`, 10*time.Second)
	waitJS(t, ctx, "the checkpoint line", `[...document.querySelectorAll("#events .meta.checkpoint")].some(e => e.textContent.includes("1 change in work"))`, 10*time.Second)

	at := h.lastSeq(sid)
	h.weft("rewind", sid, "--to", itoa(at))
	waitJS(t, ctx, "the rewind line", `[...document.querySelectorAll("#events .meta.rewound")].some(e => e.textContent.includes("Rewound to event `+itoa(at)+`"))`, 10*time.Second)
	h.weft("compact", sid)
	waitJS(t, ctx, "the compaction line", `[...document.querySelectorAll("#events .meta.compacted")].some(e => /Context compacted.*: \d+ → \d+ tokens/.test(e.textContent))`, 10*time.Second)

	out := h.weft("fork", sid)
	fork := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "ses_") && f != sid {
			fork = f
			break
		}
	}
	if fork == "" {
		t.Fatalf("weft fork printed %q", out)
	}
	run(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate("http://"+h.addr+"/#s="+fork))
	waitJS(t, ctx, "the fork line", `[...document.querySelectorAll("#events .meta.forked")].some(e => e.textContent.includes("Forked from session `+sid+`"))`, 10*time.Second)
}
