package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"weft.dev/weft/rpc"
	"weft.dev/weft/store"
	"weft.dev/weft/store/record"
)

type consoleCmd struct {
	Open bool          `help:"Open the URL in the desktop's browser (xdg-open, or $BROWSER)."`
	TTL  time.Duration `name:"ttl" default:"2m" help:"How long the login code may be used (once)." placeholder:"DURATION"`
}

// Run prints the console's URL with a one-time login code in its
// fragment (#code=…): browsers never send a fragment to a server, and
// the page removes it from the address bar and from history once it has
// exchanged it for a session cookie. The code is made here, signed with
// the host's token, so the token itself never leaves this machine in a
// URL.
func (c *consoleCmd) Run(ctx context.Context, a *app) error {
	if c.TTL <= 0 {
		return usageErr("--ttl must be positive, not %v", c.TTL)
	}
	ch := a.chooseHost()
	if ch.err != nil {
		return ch.err
	}
	base := httpBase(ch.addr)
	// Is it up? A URL to a host that is down is no use.
	tlsConf, err := a.tlsClientConfig()
	if err != nil {
		return err
	}
	hc := http.DefaultClient
	if tlsConf != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tlsConf
		hc = &http.Client{Transport: t}
		defer t.CloseIdleConnections()
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hctx, "GET", base+"healthz", nil)
	resp, err := hc.Do(req)
	if err != nil {
		if terr := tlsDialError(ch.addr, err); terr != nil {
			return terr
		}
		return a.noHostError(hintLocal, err)
	}
	resp.Body.Close()

	url := base
	if ch.rec == nil || ch.rec.TokenFrom != "none" {
		tok, err := a.token(false)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no token to log in with: set WEFT_TOKEN to the host's token, or run this as the user who runs `weft serve` (%w)", err)
		}
		if err != nil {
			return err
		}
		code, err := rpc.NewConsoleCode(tok, c.TTL)
		if err != nil {
			return err
		}
		url = base + "#code=" + code
	}
	fmt.Fprintln(a.stdout, url)
	if c.Open {
		browser := a.getenv("BROWSER")
		if browser == "" {
			browser = "xdg-open"
		}
		name, args, _ := strings.Cut(browser, " ")
		cmd := exec.CommandContext(ctx, name, append(strings.Fields(args), url)...)
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(a.stderr, "weft: cannot open a browser (%v): open the URL above yourself\n", err)
			return nil
		}
		go cmd.Wait() // the opener returns at once; the process is reaped as it exits
	}
	return nil
}

// receiptLedger keeps the console's spent login codes in the store's
// idempotency receipts: PutReceipt inserts (key, method) only when it is
// absent, in the one store every host of a deployment shares, so a code
// redeemed at one host is refused at all. The host prunes receipts after
// its ReceiptTTL (24 h), long after any code has expired.
type receiptLedger struct{ r store.Receipts }

func (l receiptLedger) SpendCode(ctx context.Context, id string, _ time.Time) (bool, error) {
	var mine [16]byte
	rand.Read(mine[:])
	fp := hex.EncodeToString(mine[:])
	got, err := l.r.PutReceipt(ctx, record.Receipt{Key: "console-code:" + id, Method: "console/login",
		Fingerprint: fp, Result: []byte(`{}`), CreatedAt: time.Now()})
	if err != nil {
		return false, fmt.Errorf("console login: record code: %w", err)
	}
	return got.Fingerprint == fp, nil
}
