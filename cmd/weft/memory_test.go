package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
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

// Crowds, case 2 of issue 17: 300 SSE readers that never read, on a
// session whose events are about 200 KiB each (the inputs of its runs),
// held one replay page and its encoding each (~130 MiB), and the
// encoding of 300 copies of every event starved the host's other
// requests (session/list took seconds). Now what every stream holds is
// bounded host-wide and the replay is not re-encoded: the host grows by
// at most 64 MiB, and it logs session/list's latency meanwhile (p50 and
// p99; BENCHMARKS.md, "Issue 17: crowds").
func TestStalledSSEReadersBigEventsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 20 MB log")
	}
	e := newEnv(t)
	small := e.script("small.json", `{"loop":true,"steps":[{"text":"ok"}]}`)
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
	s, err := c.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + small})
	if err != nil {
		t.Fatal(err)
	}
	input := strings.Repeat("z", 200<<10)
	var last string
	for i := range 100 { // 100 events of 200 KiB: a 20 MB log
		r, err := c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Busy: api.BusyQueue, Input: api.Input(event.TextParts(fmt.Sprint(i, input)))})
		if err != nil {
			t.Fatal(err)
		}
		last = r.ID
	}
	if w, err := c.WaitRun(ctx, api.WaitRunParams{RunID: last, TimeoutMs: 120_000}); err != nil || w.Run.Status != "completed" {
		t.Fatalf("last run: %+v, %v", w, err)
	}
	pid := srv.Process.Pid
	lat := func(n int) []time.Duration {
		var ds []time.Duration
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range n {
			<-tick.C
			t0 := time.Now()
			if _, err := c.ListSessions(ctx, api.ListSessionsParams{}); err != nil {
				t.Error(err)
				return ds
			}
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		return ds
	}
	quiet := lat(50)
	before := rssKiB(t, pid)

	during := make(chan []time.Duration, 1)
	go func() { during <- lat(250) }()
	stop := watchRSS(t, pid)
	conns := make([]net.Conn, 300)
	for i := range conns {
		conns[i] = stalledSSE(t, addr, tok, s.ID)
	}
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	ds := <-during
	peak := stop()
	grew := peak - before
	pct := func(ds []time.Duration, p int) time.Duration { return ds[(len(ds)-1)*p/100] }
	t.Logf("session/list alone: p50 %v, p99 %v; with 300 stalled SSE readers: p50 %v, p99 %v, max %v (%d calls)",
		pct(quiet, 50), pct(quiet, 99), pct(ds, 50), pct(ds, 99), ds[len(ds)-1], len(ds))
	t.Logf("host RSS %d KiB before, %d KiB peak with 300 stalled SSE readers: +%d KiB", before, peak, grew)
	if grew > 64<<10 {
		t.Errorf("300 stalled SSE readers grew the host by %d KiB; the bound is 64 MiB", grew)
	}
	// The host still streams to a reader that reads.
	conn := stalledSSE(t, addr, tok, s.ID)
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReaderSize(conn, 1<<20)
	for n := 0; n < 3; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "id: ") {
			n++
		}
	}
}
