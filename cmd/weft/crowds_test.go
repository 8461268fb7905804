package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/client"
)

// serveWithFiles is serve with the host's open file limit (soft and
// hard) set to files.
func (e *testEnv) serveWithFiles(addr string, files int) *exec.Cmd {
	e.t.Helper()
	c := e.cmd("serve", "--listen", addr)
	c.Path = "/bin/sh"
	c.Args = append([]string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, files), weftBin}, c.Args[1:]...)
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	if poll(10*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		return c
	}
	c.Process.Kill()
	c.Wait()
	e.t.Fatal("weft serve did not come up")
	return nil
}

// openFiles returns the number of files process pid has open.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// crowd opens n connections to addr that never authenticate, from
// workers goroutines: three in four ask GET /healthz once, read the
// answer and stay open (keep-alive), one in four sends half a request
// header and stops (slowloris). A connection the host does not take or
// answer within a second is given up. It returns the connections it
// opened, still open or not, for the caller to close.
func crowd(t *testing.T, addr string, n, workers int) []net.Conn {
	t.Helper()
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 512)
			for i := range next {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				if i%4 == 3 {
					fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nUser-Agent: slow", addr)
					continue
				}
				fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
				c.SetReadDeadline(time.Now().Add(time.Second))
				c.Read(buf) // the answer, or nothing from a host out of files
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return conns
}

// Crowds, case 1 of issue 17: idle keep-alive connections after one
// GET /healthz, and connections that send half a header, used to stay
// until the host ran out of file descriptors (~20,000 on the attacked
// machine; 4,096 here), after which a client with the token could not
// even connect. Now a crowd of them is capped and the oldest shed: the
// host keeps well within its files, its memory grows by a bounded
// amount, and an authenticated client is answered at once.
func TestIdleCrowdCannotStarveClient(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	const hostFiles = 4096
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	n := min(6000, int(lim.Cur)-512) // the crowd, from this process's own files
	if n < hostFiles+256 {
		t.Fatalf("this test needs %d open files to outnumber the host's %d; the limit is %d", hostFiles+768, hostFiles, lim.Cur)
	}
	e := newEnv(t)
	addr := freeAddr(t)
	srv := e.serveWithFiles(addr, hostFiles)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	tok := e.token()
	pid := srv.Process.Pid
	before := rssKiB(t, pid)

	stop := watchRSS(t, pid)
	conns := crowd(t, addr, n, 64)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	files := openFiles(t, pid)

	// A client with the token connects, creates a session and lists
	// sessions, each within a second.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	c, err := client.Dial(dctx, addr, client.Options{Token: tok})
	dcancel()
	if err != nil {
		t.Fatalf("with %d connections in the crowd (the host holds %d files), an authenticated client cannot connect: %v", len(conns), files, err)
	}
	defer c.Close()
	dial := time.Since(t0)
	t1 := time.Now()
	if _, err := c.CreateSession(ctx, api.CreateSessionParams{}); err != nil {
		t.Fatal(err)
	}
	create := time.Since(t1)
	grew := stop() - before
	t.Logf("crowd of %d (%d keep-alive after /healthz, %d slowloris): host holds %d files of %d, RSS %d KiB before, +%d KiB at peak; authenticated dial %v, session/create %v",
		len(conns), len(conns)-len(conns)/4, len(conns)/4, files, hostFiles, before, grew, dial, create)
	if dial > 2*time.Second || create > 2*time.Second {
		t.Errorf("the authenticated client waited %v to connect and %v for session/create; want about a millisecond each", dial, create)
	}
	if files > hostFiles*7/8 {
		t.Errorf("the host holds %d of its %d files: the crowd was not capped", files, hostFiles)
	}
	if grew > 48<<10 {
		t.Errorf("the crowd grew the host by %d KiB; want at most 48 MiB (1,024 idle connections)", grew)
	}
}

// watchRSS samples the RSS of process pid every 50 ms until the
// returned stop is called, which returns the highest RSS seen.
func watchRSS(t *testing.T, pid int) (stop func() int) {
	t.Helper()
	p := rssKiB(t, pid)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			for line := range strings.Lines(string(b)) {
				if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					var n int
					fmt.Sscan(strings.TrimSpace(rest), &n)
					mu.Lock()
					p = max(p, n)
					mu.Unlock()
				}
			}
		}
	})
	return func() int {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return max(p, rssKiB(t, pid))
	}
}
