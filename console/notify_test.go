package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// grantNotifications grants the origin the notifications permission, as
// a user who allowed them would have.
func grantNotifications(origin string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"},
			Setting:    cdpbrowser.PermissionSettingGranted, Origin: origin})
		return chromedp.Void{}, err
	}
}

// TestConsoleApprovalNotification: with notifications allowed, a new
// approval in a session the tab does not show raises one browser
// notification (once, not at every refresh); one in the session it shows
// raises none, as the page already shows it.
func TestConsoleApprovalNotification(t *testing.T) {
	h := newHost(t)
	h.start()
	model := h.script(map[string]any{"loop": true, "steps": []any{
		map[string]any{"text": "Writing.", "toolCalls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": "a.txt", "content": "hi"}}}},
		map[string]any{"text": "Written."},
	}})
	ctx := newTab(t)
	run(t, ctx, grantNotifications("http://"+h.addr))
	shown := loginAndCreate(t, ctx, h, "shown", model)
	if p := evalJS[string](t, ctx, `Notification.permission`); p != "granted" {
		t.Fatalf("Notification.permission is %q after the grant", p)
	}
	// Record every notification the page raises.
	evalJS[bool](t, ctx, `(() => { window.__notes = []; const N = window.Notification;
		window.Notification = class extends N { constructor(title, o) { super(title, o); window.__notes.push({title, body: o && o.body || ""}); } };
		return true; })()`)

	// An approval in the session on screen: the page shows it, no notification.
	h.weft("run", "-s", shown, "-p", "write", "--approve", "ask-writes", "--detach")
	waitJS(t, ctx, "the approval on screen", `document.querySelector('#events .request.approval button[data-decision="allow_once"]')`, 10*time.Second)
	waitJS(t, ctx, "its badge in the list", `document.querySelector("#sessions .badge")`, 10*time.Second)
	if n := evalJS[int](t, ctx, `window.__notes.length`); n != 0 {
		t.Errorf("an approval in the session on screen raised %d notifications, want none", n)
	}

	// An approval in another session raises one.
	out := h.weft("run", "-m", model, "-p", "write", "--approve", "ask-writes", "--detach")
	other := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "ses_") && f != shown {
			other = f
		}
	}
	if other == "" {
		t.Fatalf("weft run --detach printed %q", out)
	}
	waitJS(t, ctx, "a notification", `window.__notes.length > 0`, 10*time.Second)
	// Two more refreshes of the list (every 2 s): still one.
	waitJS(t, ctx, "the other session's badge", `[...document.querySelectorAll("#sessions .sess")].some(b => b.dataset.id === "`+other+`" && b.querySelector(".badge"))`, 10*time.Second)
	time.Sleep(4500 * time.Millisecond) // the page's refresh is on a real timer
	notes := evalJS[[]struct{ Title, Body string }](t, ctx, `window.__notes`)
	if len(notes) != 1 || !strings.Contains(notes[0].Body, other) || !strings.Contains(notes[0].Body, "approve write_file") {
		t.Errorf("notifications %+v, want one for session %s's write_file", notes, other)
	}
}
