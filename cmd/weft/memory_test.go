package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
	"weft.dev/weft/event"
)

// rssKiB returns the resident set of process pid in KiB.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// stalledSSE opens an SSE stream of session sid from the start and never
// reads it: a receive buffer of 4 KiB fills at once and the host's
// writes block.
func stalledSSE(t *testing.T, addr, tok, sid string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", sid, addr, tok)
	return conn
}

// Break 6 of the attack: 300 SSE readers that never read grew the host
// from 35 MB to 1.17 GB. Each reader now holds at most a small queue and
// one replay page (64 KiB), and a reader that stays stalled past the
// write deadline is dropped; the target is at most 64 MiB more RSS for
// 300 stalled readers on a 40 MB log.
func TestStalledSSEReadersBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 40 MB log")
	}
	e := newEnv(t)
	word := strings.Repeat("x", 4000) + " "
	big := e.script("big.json", `{"loop":true,"steps":[{"text":"`+strings.Repeat(word, 1000)+`"}]}`)
	addr := freeAddr(t)
	srv := e.serve(addr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	tok := e.token()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + big})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // 10 runs of 4 MB: a 40 MB log
		r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts(fmt.Sprint("run ", i)))})
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 120_000})
		if err != nil || w.Run.Status != "completed" {
			t.Fatalf("run %d: %+v, %v", i, w, err)
		}
	}
	pid := srv.Process.Pid
	before := rssKiB(t, pid)

	conns := make([]net.Conn, 300)
	for i := range conns {
		conns[i] = stalledSSE(t, addr, tok, s.ID)
	}
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	// Let the host write until every stream blocks; take the highest RSS
	// seen over a few seconds.
	peak := before
	deadline := time.Now().Add(5 * time.Second)
	for tick := time.NewTicker(250 * time.Millisecond); time.Now().Before(deadline); <-tick.C {
		peak = max(peak, rssKiB(t, pid))
	}
	grew := peak - before
	t.Logf("host RSS %d KiB before, %d KiB peak with 300 stalled SSE readers: +%d KiB", before, peak, grew)
	if grew > 64<<10 {
		t.Fatalf("300 stalled SSE readers grew the host by %d KiB; the bound is 64 MiB", grew)
	}
	// The host still answers, and a reader that does read gets the log.
	conn := stalledSSE(t, addr, tok, s.ID)
	defer conn.Close()
	r := bufio.NewReader(conn)
	var n int
	for n < 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "id: ") {
			n++
		}
	}
}
