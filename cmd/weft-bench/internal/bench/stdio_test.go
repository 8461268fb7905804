package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRPCDelay is how long the fake `weft rpc` takes from a run/start to
// the run.completed of its run.
const fakeRPCDelay = 30 * time.Millisecond

// isFakeRPC reports whether this test binary was started as the fake
// `weft rpc` of TestWeftRPCTurn: with the one argument "rpc" and the
// environment weftEnv gives a weft child.
func isFakeRPC() bool {
	return len(os.Args) == 2 && os.Args[1] == "rpc" && os.Getenv("WEFT_STORE") != ""
}

// fakeRPC serves the part of weft's stdio protocol a warm turn uses, in
// orders that test the driver. It answers initialize only once the client
// has refused a request of its own. Session s1's first run ends before
// run/start's reply names it (a client must keep that end), its later
// runs fail; other sessions' runs are answered at once and end
// fakeRPCDelay later, after another run's end.
func fakeRPC() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	event := func(session, run, typ string) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "method": "events/event", "params": map[string]any{
			"subscriptionId": "sub", "event": map[string]any{"seq": 1, "sessionId": session, "runId": run, "type": typ, "data": map[string]any{}}}}
	}
	var initID json.RawMessage
	n := 0
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
			} `json:"params"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			os.Exit(3)
		}
		reply := func(id json.RawMessage, result any) {
			send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		}
		n++
		id := fmt.Sprintf("%d", n)
		switch m.Method {
		case "initialize":
			initID = m.ID
			send(map[string]any{"jsonrpc": "2.0", "id": 900, "method": "client/ask", "params": map[string]any{}})
		case "":
			if string(m.ID) == "900" && m.Error != nil {
				reply(initID, map[string]any{})
			}
		case "session/create":
			reply(m.ID, map[string]any{"id": "s" + id, "lastSeq": 0})
		case "events/subscribe":
			reply(m.ID, map[string]any{"subscriptionId": "sub"})
		case "run/start":
			run := "r" + id
			switch {
			case m.Params.SessionID == "s3" && n == 5: // s1's first run
				send(event(m.Params.SessionID, run, "run.completed"))
				reply(m.ID, map[string]any{"id": run})
			case m.Params.SessionID == "s3":
				send(event(m.Params.SessionID, run, "run.failed"))
				reply(m.ID, map[string]any{"id": run})
			default:
				reply(m.ID, map[string]any{"id": run})
				send(event(m.Params.SessionID, "other", "run.completed"))
				time.Sleep(fakeRPCDelay)
				send(event(m.Params.SessionID, run, "run.completed"))
			}
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "no " + m.Method}})
		}
	}
}

// TestWeftRPCTurn drives a fake `weft rpc` through the warm-turn driver:
// a turn is timed from writing run/start to reading its run.completed,
// which may come before run/start's reply; another run's end does not
// end it; a run that fails is an error; the server's own requests are
// refused.
func TestWeftRPCTurn(t *testing.T) {
	mock, err := startMock()
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()
	r := &runner{cfg: Config{Weft: os.Args[0]}, mock: mock, dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := r.startWeftRPC(ctx, filepath.Join(r.dir, "weft"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	turns, err := w.open(ctx, 1) // its warm-up turn ends before run/start is answered
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turns[0](ctx); err == nil || !strings.Contains(err.Error(), "run.failed") {
		t.Errorf("a failed run: %v, want its run.failed", err)
	}
	if turns, err = w.open(ctx, 1); err != nil {
		t.Fatal(err)
	}
	d, err := turns[0](ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d < fakeRPCDelay {
		t.Errorf("turn took %v: it ended before its run.completed (sent %v after run/start)", d, fakeRPCDelay)
	}
	select {
	case <-w.done:
		t.Fatalf("the fake server exited: %v", w.ch.errorf("fake weft rpc"))
	default:
	}
}
