package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// An expired login link, and a login whose token was rotated since:
// the page says which, and what to do.
func TestConsoleLoginExpiredAndRevoked(t *testing.T) {
	h := newHost(t)
	h.start()
	ctx := newTab(t)

	run(t, ctx, chromedp.Navigate(h.consoleURL("--ttl", "1ns")))
	waitJS(t, ctx, "the login screen", `!document.getElementById("login").hidden`, 10*time.Second)
	if r := evalJS[string](t, ctx, `document.getElementById("login").dataset.reason`); r != "expired" {
		t.Errorf("expired link: reason %q, want expired", r)
	}
	if msg := evalJS[string](t, ctx, `document.getElementById("login-msg").textContent`); !strings.Contains(msg, "expired") || !strings.Contains(msg, "weft console") {
		t.Errorf("expired link: the page says %q", msg)
	}

	// A good login, then the host restarts with another token.
	run(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(h.consoleURL()))
	waitJS(t, ctx, "the app", `!document.getElementById("app").hidden && window.weftConsole.connected`, 10*time.Second)
	h.kill()
	h.extra = []string{"WEFT_TOKEN=a-rotated-token"}
	h.start()
	waitJS(t, ctx, "the login screen after the rotation", `!document.getElementById("login").hidden`, 15*time.Second)
	if r := evalJS[string](t, ctx, `document.getElementById("login").dataset.reason`); r != "revoked" {
		t.Errorf("after the token was rotated: reason %q, want revoked", r)
	}
}

// A host that goes down: the page says so, retries, and goes on when it
// is back.
func TestConsoleHostDown(t *testing.T) {
	h := newHost(t)
	h.start()
	ctx := newTab(t)
	loginAndCreate(t, ctx, h, "down", h.script(map[string]any{"steps": []any{map[string]any{"text": "hi"}}}))
	h.kill()
	waitJS(t, ctx, "the page saying the host is down", `document.body.dataset.conn === "down" && document.getElementById("banner").textContent.includes("Reconnecting")`, 10*time.Second)
	// Still down a while later: still retrying, still saying so.
	time.Sleep(1500 * time.Millisecond) // the page's retries, which nothing here can signal
	waitJS(t, ctx, "still saying so", `!document.getElementById("banner").hidden && document.body.dataset.conn !== "open"`, time.Second)
	h.start()
	waitJS(t, ctx, "reconnected", `window.weftConsole.connected && document.getElementById("banner").hidden`, 15*time.Second)
}

// A session deleted elsewhere while the page shows it, and an approval
// answered elsewhere (the CLI): the page shows both, and who answered.
func TestConsoleDeletedAndAnsweredElsewhere(t *testing.T) {
	h := newHost(t)
	h.start()
	model := h.script(map[string]any{"steps": []any{
		map[string]any{"text": "Running it.", "toolCalls": []any{map[string]any{"name": "shell", "arguments": map[string]any{"command": "echo hi"}}}},
		map[string]any{"text": "Done."},
	}})
	ctx := newTab(t)
	sid := loginAndCreate(t, ctx, h, "elsewhere", model)
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`#input`), "go"+kb.Enter))
	waitJS(t, ctx, "the approval", `document.querySelector("#events .request.approval .card[data-id]")`, 15*time.Second)
	waitJS(t, ctx, "the badge in the list", `document.querySelector("#sessions .badge")`, 10*time.Second)
	id := evalJS[string](t, ctx, `document.querySelector("#events .request.approval .card").dataset.id`)
	h.weft("approve", id)
	waitJS(t, ctx, "who answered", `document.querySelector("#events .request.approval .resolution").textContent.includes("by weft approve")`, 10*time.Second)
	if n := evalJS[int](t, ctx, `[...document.querySelectorAll("#events .request.approval button")].filter(b => !b.disabled).length`); n != 0 {
		t.Errorf("%d answer buttons still enabled after the approval was answered elsewhere", n)
	}
	waitJS(t, ctx, "the run completed", `document.querySelector("#events .runend.completed")`, 15*time.Second)
	waitJS(t, ctx, "the badge gone", `!document.querySelector("#sessions .badge")`, 10*time.Second)

	h.weft("sessions", "rm", sid)
	waitJS(t, ctx, "the page saying the session was deleted", `document.querySelector("#events .deleted") && document.getElementById("banner").textContent.includes("deleted")`, 10*time.Second)
	if !evalJS[bool](t, ctx, `document.getElementById("composer").classList.contains("off")`) {
		t.Error("the composer still takes input for a deleted session")
	}
}

// Two tabs on one session stay in step: a run started in one streams in
// both, and an approval answered in one is resolved in the other, which
// says who answered.
func TestConsoleTwoTabs(t *testing.T) {
	h := newHost(t)
	h.start()
	model := h.script(map[string]any{"steps": []any{
		map[string]any{"text": "Checking first.", "toolCalls": []any{map[string]any{"name": "shell", "arguments": map[string]any{"command": "echo two-tabs"}}}},
		map[string]any{"text": "Both tabs saw it."},
	}})
	a := newTab(t)
	sid := loginAndCreate(t, a, h, "two", model)
	b := newTab(t)
	run(t, b, chromedp.Navigate(h.consoleURL()))
	waitJS(t, b, "the second tab", `window.weftConsole.connected`, 10*time.Second)
	run(t, b, chromedp.Click(chromedp.CSS(`#sessions .sess[data-id="`+sid+`"]`)))
	waitJS(t, b, "the session in the second tab", `window.weftConsole.sessionId === "`+sid+`"`, 10*time.Second)

	run(t, a, chromedp.SendKeys(chromedp.CSS(`#input`), "both"+kb.Enter))
	for _, tab := range []context.Context{a, b} {
		waitJS(t, tab, "the approval in both tabs", `document.querySelector('#events .request.approval button[data-decision="allow_once"]')`, 15*time.Second)
	}
	run(t, b, chromedp.Click(chromedp.CSS(`#events .request.approval button[data-decision="allow_once"]`)))
	for _, tab := range []context.Context{a, b} {
		waitJS(t, tab, "the answer in both tabs", `document.querySelector("#events .request.approval .resolution").textContent.includes("by weft console")`, 10*time.Second)
		waitJS(t, tab, "the run's end in both tabs", `document.querySelector("#events .runend.completed")`, 15*time.Second)
	}
	la := evalJS[int64](t, a, `weftConsole.lastSeq`)
	lb := evalJS[int64](t, b, `weftConsole.lastSeq`)
	if last := h.lastSeq(sid); la != last || lb != last {
		t.Errorf("tabs at seq %d and %d; the log ends at %d", la, lb, last)
	}
}

// `weft console` against a host that is down says so instead of printing
// a URL that leads nowhere; `--ttl` must be positive.
func TestConsoleCommandHostDown(t *testing.T) {
	h := newHost(t)
	for _, args := range [][]string{{"console"}, {"console", "--ttl", "-1s"}} {
		c := h.command(args...)
		out, err := c.CombinedOutput()
		if err == nil || strings.Contains(string(out), "#code=") {
			t.Errorf("weft %s with no host: err %v, output %q", strings.Join(args, " "), err, out)
		}
	}
	c := h.command("console")
	out, _ := c.CombinedOutput()
	if !strings.Contains(string(out), "weft serve") {
		t.Errorf("weft console with no host says %q: want how to start one", out)
	}
}
