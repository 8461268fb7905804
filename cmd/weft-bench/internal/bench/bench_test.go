package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/llm"
	"weft.dev/weft/llm/openai"
)

func TestMain(m *testing.M) {
	// The sandbox figure re-executes this binary as the shell's helper.
	if sandbox.IsHelper(os.Args) {
		sandbox.Main(os.Args)
	}
	if isFakeRPC() {
		fakeRPC()
		os.Exit(0)
	}
	// The wire fan-out figures re-execute it as their clients.
	if IsFanoutClients(os.Args) {
		FanoutClientsMain(os.Args)
	}
	goleak.VerifyTestMain(m)
}

// TestQuickInProcess runs every in-process figure with quick counts and
// checks that each measured something and that the report renders.
func TestQuickInProcess(t *testing.T) {
	rep, err := Run(t.Context(), Config{Quick: true, TempDir: t.TempDir(), Progress: testLog{t},
		Only: regexp.MustCompile(`^(run-start|idle-sessions|fanout-inproc|fanout-wire|append|sandbox-start)$`)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"run-start": 2, "idle-sessions": 1, "fanout-inproc": 2, "fanout-wire": 4, "append": 2, "sandbox-start": 1}
	got := map[string]int{}
	for _, res := range rep.Results {
		got[res.Figure]++
		if res.Verdict == Failed {
			t.Errorf("%s: %s: %s", res.Figure, res.Name, res.Note)
		}
		if res.Verdict != Skipped && len(res.Values) == 0 {
			t.Errorf("%s: %s: no values", res.Figure, res.Name)
		}
	}
	for f, n := range want {
		if got[f] != n {
			t.Errorf("figure %s: %d rows, want %d", f, got[f], n)
		}
	}
	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "append batch=64") || !strings.Contains(table.String(), "QUICK") {
		t.Errorf("table:\n%s", table.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Results) != len(rep.Results) {
		t.Fatalf("JSON round trip: %v, %d results", err, len(back.Results))
	}
	files, err := rep.WritePlots(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Errorf("plots: %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() != plotW {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// testLog writes progress lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestProcessFiguresNeedWeft checks that without a weft binary the process
// figures are skipped, saying why, rather than failed.
func TestProcessFiguresNeedWeft(t *testing.T) {
	rep, err := Run(t.Context(), Config{Quick: true, TempDir: t.TempDir(), Only: regexp.MustCompile(`^(oneshot|warm-turn|host-rss)$`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 5 {
		t.Fatalf("%d results, want 5", len(rep.Results))
	}
	for _, res := range rep.Results {
		if res.Verdict != Skipped || !strings.Contains(res.Note, "weft binary") {
			t.Errorf("%s: %s %q", res.Name, res.Verdict, res.Note)
		}
	}
}

// TestMockChat checks that weft's Chat Completions provider reads the
// mock's answer.
func TestMockChat(t *testing.T) {
	m, err := startMock()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := openai.NewChat(openai.Config{APIKey: "x", BaseURL: m.URL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var text strings.Builder
	var finished bool
	for ev, err := range p.Stream(ctx, &llm.Request{Model: "mock-model", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ev.Text)
		finished = finished || ev.Finish != nil
	}
	if text.String() != "Hello from the mock model." || !finished {
		t.Errorf("got %q, finished %v", text.String(), finished)
	}
}

// TestMockResponses checks the Responses stream with weft's Responses
// provider, which requires response.completed.
func TestMockResponses(t *testing.T) {
	m, err := startMock()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := openai.NewResponses(openai.Config{APIKey: "x", BaseURL: m.URL()})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for ev, err := range p.Stream(t.Context(), &llm.Request{Model: "mock-model", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ev.Text)
	}
	if text.String() != "Hello from the mock model." {
		t.Errorf("got %q", text.String())
	}
	if m.requests.Load() != 1 {
		t.Errorf("%d requests", m.requests.Load())
	}
}

func TestStats(t *testing.T) {
	var s samples
	var h hist
	for i := 1; i <= 100; i++ {
		d := time.Duration(i) * time.Millisecond
		s = append(s, d)
		h.add(d)
	}
	if got := s.quantile(0.5); got != 50*time.Millisecond {
		t.Errorf("median %v", got)
	}
	if got := s.quantile(0.99); got != 99*time.Millisecond {
		t.Errorf("p99 %v", got)
	}
	if got := h.quantile(0.5); got < 50*time.Millisecond || got > 51*time.Millisecond {
		t.Errorf("hist median %v, want within 2 %% above 50ms", got)
	}
	if c := h.cdf(); c[len(c)-1].p != 1 {
		t.Errorf("cdf ends at %v", c[len(c)-1].p)
	}
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := fmtInt(in); got != want {
			t.Errorf("fmtInt(%v) = %q, want %q", in, got, want)
		}
	}
	if got := ratio(2.7, 85.8); got != "1/31.8" {
		t.Errorf("ratio = %q", got)
	}
	if got := fmtDur(2710 * time.Microsecond); got != "2.71 ms" {
		t.Errorf("fmtDur = %q", got)
	}
}
