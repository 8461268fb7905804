package acpagent_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/acpagent"
	"weft.dev/weft/store/sqlite"
)

// wideScript makes a run of about 2,000 events: one step of 1,000 tool
// calls (each a tool.call.started and a tool.call.completed), then an
// answer.
func wideScript() string {
	calls := make([]string, 1000)
	for i := range calls {
		calls[i] = `{"name": "list_dir", "arguments": {"path": "."}}`
	}
	return `{"steps": [{"text": "Looking.", "toolCalls": [` + strings.Join(calls, ",") + `]}, {"text": "Seen."}], "loop": true}`
}

// BenchmarkLoad10k measures session/load of a session of 10,000 events
// in a SQLite store, through the Go client as `weft acp --host` runs:
// first-update-ms is from the request to the first session/update the
// client gets, load-ms to the load's answer (the whole replay sent).
func BenchmarkLoad10k(b *testing.B) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "weft.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	th := newTestHostOn(b, st)
	ctx := context.Background()
	s, err := th.h.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:wide"})
	if err != nil {
		b.Fatal(err)
	}
	for {
		cur, err := th.h.GetSession(ctx, api.SessionGetParams{SessionID: s.ID})
		if err != nil {
			b.Fatal(err)
		}
		if cur.LastSeq >= 10000 {
			b.Logf("%d events", cur.LastSeq)
			break
		}
		r, err := th.h.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input{{Type: "text", Text: "look"}}, DefaultPreset: api.PresetNeverAsk})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := th.h.WaitRun(ctx, api.WaitRunParams{RunID: r.ID, TimeoutMs: 60000}); err != nil {
			b.Fatal(err)
		}
	}
	var first, whole time.Duration
	n := 0
	for b.Loop() {
		p := th.connect(b, acpagent.Config{})
		p.initialize(b)
		t0 := time.Now()
		got := make(chan time.Duration, 1)
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		go func() { <-ch; got <- time.Since(t0) }()
		if _, err := p.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: acp.SessionId(s.ID), Cwd: th.cwd, McpServers: []acp.McpServer{}}); err != nil {
			b.Fatal(err)
		}
		whole += time.Since(t0)
		first += <-got
		n++
		if len(p.snapshot()) < 5000 {
			b.Fatalf("replayed %d updates", len(p.snapshot()))
		}
		p.close()
	}
	b.ReportMetric(float64(first.Microseconds())/1000/float64(n), "first-update-ms")
	b.ReportMetric(float64(whole.Microseconds())/1000/float64(n), "load-ms")
}
