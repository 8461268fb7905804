package console_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// slowText is a scripted step that streams its input, then n words,
// one every ms.
func slowText(n, ms int) map[string]any {
	return map[string]any{"text": "{{input}}:" + words("w", n), "delayMs": ms}
}

// TestConsoleEndToEnd is the "done when": a person logs in with
// the code from `weft console`, creates a session, watches a run stream,
// approves a shell command, steers, cancels, and the host is killed and
// restarted under the open page, which resumes without a duplicated or
// missing event.
func TestConsoleEndToEnd(t *testing.T) {
	h := newHost(t)
	h.start()
	model := h.script(map[string]any{"steps": []any{
		map[string]any{"text": "Let me look at that for you now.", "delayMs": 40,
			"toolCalls": []any{map[string]any{"name": "shell", "arguments": map[string]any{"command": "echo approved-output"}}}},
		slowText(60, 60), slowText(60, 60), slowText(60, 60), slowText(60, 60),
		slowText(60, 60), slowText(60, 60), slowText(60, 60),
	}})
	ctx := newTab(t)
	sid := loginAndCreate(t, ctx, h, "demo", model)

	// Start a run: Enter sends; the text streams in.
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`#input`), "hello there"+kb.Enter))
	waitJS(t, ctx, "the user's message", `[...document.querySelectorAll("#events .user .text")].some(e => e.textContent === "hello there")`, 10*time.Second)
	waitJS(t, ctx, "text part-way streamed", `(() => { const t = document.querySelector("#events .assistant .text"); return t && t.textContent.length > 0 && !t.textContent.includes("now."); })()`, 10*time.Second)
	waitJS(t, ctx, "the whole text", `document.querySelector("#events .assistant .text").textContent === "Let me look at that for you now."`, 10*time.Second)

	// The shell call waits for approval: allow it from the page.
	waitJS(t, ctx, "the approval", `document.querySelector('#events .request.approval button[data-decision="allow_once"]')`, 10*time.Second)
	waitJS(t, ctx, "the status waiting", `document.getElementById("status").textContent === "waiting"`, 5*time.Second)
	shot(t, ctx, "approval")
	run(t, ctx, chromedp.Click(chromedp.CSS(`#events .request.approval button[data-decision="allow_once"]`)))
	waitJS(t, ctx, "who answered", `document.querySelector("#events .request.approval .resolution").textContent.includes("Allowed once by weft console")`, 10*time.Second)
	waitJS(t, ctx, "the shell's output", `[...document.querySelectorAll("#events .toolcall .output")].some(e => e.textContent.includes("approved-output"))`, 15*time.Second)

	// Steer the streaming run, then cancel it with Esc.
	waitJS(t, ctx, "the second step streaming", `document.body.innerText.includes("hello there: w0 w1 w2")`, 15*time.Second)
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`#input`), "steer-now"+kb.Enter))
	waitJS(t, ctx, "the steer accepted", `[...document.querySelectorAll("#events .steer .text")].some(e => e.textContent === "steer-now")`, 10*time.Second)
	run(t, ctx, chromedp.KeyEvent(kb.Escape))
	waitJS(t, ctx, "the run cancelled", `document.querySelector("#events .runend.cancelled")`, 10*time.Second)
	waitJS(t, ctx, "the cancel button off", `document.getElementById("cancel").disabled`, 5*time.Second)

	// A new run streams; kill -9 the host under the page and restart it.
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`#input`), "go on"+kb.Enter))
	waitJS(t, ctx, "the third run streaming", `document.body.innerText.includes("go on: w0 w1 w2 w3 w4 w5")`, 15*time.Second)
	h.kill()
	waitJS(t, ctx, "reconnecting shown", `!document.getElementById("banner").hidden && document.getElementById("banner").textContent.includes("Reconnecting")`, 10*time.Second)
	h.start()
	waitJS(t, ctx, "the run interrupted", `document.querySelector("#events .runend.interrupted")`, 20*time.Second)
	waitJS(t, ctx, "the banner gone", `document.getElementById("banner").hidden`, 10*time.Second)

	// The page goes on live after the restart.
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`#input`), "once more"+kb.Enter))
	waitJS(t, ctx, "a run after the restart", `document.querySelectorAll("#events .runend.completed").length >= 1`, 20*time.Second)

	// Every event of the log applied once: none twice, none missing.
	last := h.lastSeq(sid)
	waitJS(t, ctx, "the page at the log's end", `window.weftConsole.lastSeq >= `+itoa(last), 10*time.Second)
	got := evalJS[struct{ LastSeq, FirstSeq, Applied int64 }](t, ctx, `({LastSeq: weftConsole.lastSeq, FirstSeq: weftConsole.firstSeq, Applied: weftConsole.applied})`)
	if got.LastSeq != last || got.Applied != got.LastSeq-got.FirstSeq+1 {
		t.Errorf("page applied %d events of seq %d..%d; the log ends at %d", got.Applied, got.FirstSeq, got.LastSeq, last)
	}
	// The text streamed before the crash is on the page once.
	killTexts := evalJS[int](t, ctx, `[...document.querySelectorAll("#events .assistant .text")].filter(e => e.textContent.startsWith("go on:")).length`)
	if killTexts != 1 {
		t.Errorf("the text streamed before the crash is shown %d times, want once", killTexts)
	}
	seqs := evalJS[[]int](t, ctx, `[...document.querySelectorAll("#events li[data-seq]")].map(e => +e.dataset.seq)`)
	seen := map[int]bool{}
	for _, s := range seqs {
		if seen[s] {
			t.Errorf("seq %d is rendered twice", s)
		}
		seen[s] = true
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
