package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"weft.dev/weft/internal/testenv"
)

// weftBin is the weft binary the browser tests serve, built once.
var weftBin string

// browser is the one headless Chromium of this test binary; each test
// opens its own tab in it.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weft-console")
	if err != nil {
		panic(err)
	}
	weftBin = filepath.Join(dir, "weft")
	build := exec.Command("go", "build", "-o", weftBin, "../cmd/weft")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build weft: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// newTab returns a new tab of the test binary's browser, started on
// first use, closed when t ends. Without Debian's chromium the test is
// skipped, or under CI fails.
func newTab(t *testing.T) context.Context {
	t.Helper()
	path := testenv.Command(t, "chromium")
	browser.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox, // as root in CI
			chromedp.WindowSize(1280, 860),
			chromedp.Flag("disable-dev-shm-usage", true),
		)
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		browser.ctx = bctx
		browser.cancel = func() { bcancel(); acancel() }
		browser.err = chromedp.Do(bctx)
	})
	if browser.err != nil {
		t.Fatalf("start chromium: %v", browser.err)
	}
	ctx, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	// The first Run binds the tab to its context: this one, not a
	// later action's timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}
