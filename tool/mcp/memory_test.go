package mcp

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/event"
)

// memServer is an in-process server the manager dials through in-memory
// transports, so that time can be faked.
type memServer struct {
	srv *sdk.Server
	mu  sync.Mutex
	ss  []*sdk.ServerSession
	n   int // connections made
}

func (s *memServer) dial(string) (sdk.Transport, error) {
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.srv.Connect(context.Background(), st, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.ss = append(s.ss, ss)
	s.n++
	s.mu.Unlock()
	return ct, nil
}

// crash ends the server's side of every connection.
func (s *memServer) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.ss {
		ss.Close()
	}
	s.ss = nil
}

func (s *memServer) conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func newMem(t *testing.T, cfg Config) (*Manager, *memServer) {
	t.Helper()
	ms := &memServer{srv: newFakeServer("tools")}
	cfg.Servers = map[string]event.MCPServer{"mem": {URL: "http://in-memory.invalid/"}}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.dial = ms.dial
	return m, ms
}

func TestIdleStopAndLazyRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ms := newMem(t, Config{IdleTimeout: time.Minute})
		defer m.Close()
		if m.running() != 0 || ms.conns() != 0 {
			t.Fatal("a server started before it was needed")
		}
		reg := tools(t, m, nil)
		if res := call(reg, "mcp__mem__echo", `{"text":"a"}`, 0); res.Output != "a" {
			t.Fatalf("call: %+v", res)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if m.running() != 1 {
			t.Fatal("stopped before it was idle")
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if m.running() != 0 {
			t.Fatal("not stopped when idle")
		}
		// A tool of an old step's registry starts it again.
		if res := call(reg, "mcp__mem__echo", `{"text":"b"}`, 0); res.Output != "b" {
			t.Fatalf("call after the idle stop: %+v", res)
		}
		if m.running() != 1 || ms.conns() != 2 {
			t.Fatalf("running %d, connections %d", m.running(), ms.conns())
		}
		// Forgotten after another idle period, and made again on use.
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		m.mu.Lock()
		n := len(m.servers)
		m.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d servers remembered", n)
		}
		if res := call(reg, "mcp__mem__echo", `{"text":"c"}`, 0); res.Output != "c" {
			t.Fatalf("call after being forgotten: %+v", res)
		}
	})
}

func TestRestartBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, ms := newMem(t, Config{})
		defer m.Close()
		reg := tools(t, m, nil)
		ms.crash()
		synctest.Wait()
		// The first restart is at once.
		if res := call(reg, "mcp__mem__echo", `{"text":"a"}`, 0); res.Output != "a" {
			t.Fatalf("after one crash: %+v", res)
		}
		ms.crash()
		synctest.Wait()
		res := call(reg, "mcp__mem__echo", `{"text":"b"}`, 0)
		if !res.IsError || !strings.Contains(res.Output, "failed 2 times in a row; weft starts it again in 1s") {
			t.Fatalf("during the backoff: %+v", res)
		}
		time.Sleep(time.Second)
		if res := call(reg, "mcp__mem__echo", `{"text":"c"}`, 0); res.Output != "c" {
			t.Fatalf("after the backoff: %+v", res)
		}
		ms.crash()
		synctest.Wait()
		if res := call(reg, "mcp__mem__echo", `{"text":"d"}`, 0); !strings.Contains(res.Output, "again in 2s") {
			t.Fatalf("third failure: %+v", res)
		}
		// A connection that lived long clears the count.
		time.Sleep(2 * time.Second)
		call(reg, "mcp__mem__echo", `{"text":"e"}`, 0)
		time.Sleep(2 * time.Minute)
		ms.crash()
		synctest.Wait()
		if res := call(reg, "mcp__mem__echo", `{"text":"f"}`, 0); res.Output != "f" {
			t.Fatalf("after a long life: %+v", res)
		}
	})
}

func TestToolListChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newMem(t, Config{})
		defer m.Close()
		reg := tools(t, m, nil)
		if _, ok := reg.Lookup("mcp__mem__grown"); ok {
			t.Fatal("grown before grow")
		}
		call(reg, "mcp__mem__grow", `{}`, 0)
		time.Sleep(time.Second) // the server sends the notification after 10 ms
		synctest.Wait()
		reg = tools(t, m, nil) // the next step
		if res := call(reg, "mcp__mem__grown", `{}`, 0); res.Output != "grown" {
			t.Fatalf("the new tool: %+v", res)
		}
	})
}

func TestCloseFailsCallsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newMem(t, Config{})
		reg := tools(t, m, nil)
		done := make(chan string)
		go func() { done <- call(reg, "mcp__mem__sleep", `{"ms":3600000}`, 0).Output }()
		synctest.Wait()
		m.Close()
		if out := <-done; !strings.Contains(out, "mcp server \"mem\"") {
			t.Fatalf("the call in flight: %q", out)
		}
		if res := call(reg, "mcp__mem__echo", `{"text":"x"}`, 0); !strings.Contains(res.Output, "closed") {
			t.Fatalf("after Close: %+v", res)
		}
	})
}
