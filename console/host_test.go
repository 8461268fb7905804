package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// weftHost is a real `weft serve` process in a sandbox of its own: a
// store, a state directory with its token, a work directory.
type weftHost struct {
	t     *testing.T
	dir   string
	addr  string
	env   []string
	cmd   *exec.Cmd
	extra []string // more environment for the next start
}

func newHost(t *testing.T) *weftHost {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	h := &weftHost{t: t, dir: dir, addr: addr, env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"WEFT_STORE=" + filepath.Join(dir, "weft.db"), "WEFT_HOST=" + addr,
	}}
	t.Cleanup(h.kill)
	return h
}

func (h *weftHost) command(args ...string) *exec.Cmd {
	c := exec.Command(weftBin, args...)
	c.Dir = filepath.Join(h.dir, "work")
	c.Env = append(append([]string{}, h.env...), h.extra...)
	return c
}

// start runs `weft serve` and waits until it answers.
func (h *weftHost) start() {
	h.t.Helper()
	c := h.command("serve", "--listen", h.addr)
	// A test binary killed by its timeout runs no cleanup: the host
	// goes with it.
	dieWithTest(c)
	var logb bytes.Buffer
	c.Stderr = &logb
	if err := c.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.cmd = c
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + h.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond) // a process outside the test: nothing signals
	}
	h.kill()
	h.t.Fatalf("weft serve did not come up:\n%s", logb.String())
}

// kill ends the host with SIGKILL, as a crash would.
func (h *weftHost) kill() {
	if h.cmd != nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
		h.cmd = nil
	}
}

// weft runs a weft client command against the host.
func (h *weftHost) weft(args ...string) string {
	h.t.Helper()
	c := h.command(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		h.t.Fatalf("weft %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// consoleURL is what `weft console` prints.
func (h *weftHost) consoleURL(args ...string) string {
	h.t.Helper()
	u := strings.TrimSpace(h.weft(append([]string{"console"}, args...)...))
	if !strings.HasPrefix(u, "http://"+h.addr+"/#code=") {
		h.t.Fatalf("weft console printed %q", u)
	}
	return u
}

// script writes a scripted model's script and returns its model name.
func (h *weftHost) script(v any) string {
	h.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		h.t.Fatal(err)
	}
	p := filepath.Join(h.dir, fmt.Sprintf("script-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		h.t.Fatal(err)
	}
	return "scripted:" + p
}

// lastSeq is the last seq of the session's log, as `weft events` reads it.
func (h *weftHost) lastSeq(session string) int64 {
	h.t.Helper()
	out := h.weft("events", session, "--json")
	var last int64
	for line := range strings.Lines(out) {
		var e struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Seq > last {
			last = e.Seq
		}
	}
	return last
}

// waitJS polls a JavaScript condition in the tab until it is true.
func waitJS(t *testing.T, ctx context.Context, what, expr string, timeout time.Duration) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := chromedp.Run(tctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)))
		if err == nil {
			return
		}
		// A navigation that replaces the page's execution context
		// between two polls ends the poll with this error: poll the
		// new page.
		if strings.Contains(err.Error(), "Cannot find context with specified id") && tctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(-1500)`))
		t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, state)
	}
}

// evalJS evaluates expr in the tab.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// run runs chromedp actions and fails the test on an error.
func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// words is n words of filler.
func words(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " %s%d", prefix, i)
	}
	return b.String()
}

// loginAndCreate logs the tab in with a fresh code and creates a session
// with model through the page's form; it returns the session's id.
func loginAndCreate(t *testing.T, ctx context.Context, h *weftHost, title, model string) string {
	t.Helper()
	run(t, ctx, chromedp.Navigate(h.consoleURL()))
	waitJS(t, ctx, "the app", `!document.getElementById("app").hidden && window.weftConsole.connected`, 10*time.Second)
	href := evalJS[string](t, ctx, `location.href`)
	if strings.Contains(href, "code=") {
		t.Errorf("the login code stays in the address bar: %s", href)
	}
	run(t, ctx,
		chromedp.Click(chromedp.CSS(`#new summary`)),
		chromedp.SendKeys(chromedp.CSS(`#new-form [name=title]`), title),
		chromedp.SendKeys(chromedp.CSS(`#new-form [name=model]`), model),
		chromedp.SendKeys(chromedp.CSS(`#new-form [name=mounts]`), filepath.Join(h.dir, "work")),
		chromedp.Click(chromedp.CSS(`#new-form button[type=submit]`)),
	)
	waitJS(t, ctx, "the new session's view", `window.weftConsole.sessionId && !document.getElementById("view").hidden`, 10*time.Second)
	return evalJS[string](t, ctx, `window.weftConsole.sessionId`)
}
