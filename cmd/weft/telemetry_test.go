package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"weft.dev/weft/event"
)

// TestServeTracesAndMetrics: `weft serve` with OTEL_EXPORTER_OTLP_ENDPOINT
// sends a run's spans to an OTLP/HTTP receiver, records the trace ID in
// run.started, and serves /metrics behind the token on --listen and
// without it on --metrics-listen.
func TestServeTracesAndMetrics(t *testing.T) {
	var mu sync.Mutex
	traces := map[string][]string{} // trace ID -> span names
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					id := hex.EncodeToString(s.GetTraceId())
					traces[id] = append(traces[id], s.GetName())
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	defer rc.Close()
	e := newEnv(t)
	e.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.URL, "OTEL_BSP_SCHEDULE_DELAY=10", "OTEL_SERVICE_NAME=weft-test"}
	addr, maddr := freeAddr(t), freeAddr(t)
	srv := e.serve(addr, "--metrics-listen", maddr)
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	fast := e.script("fast.json", quickstart)
	out, stderr, code := e.weft("", "--host", addr, "run", "--detach", "-m", "scripted:"+fast, "-p", "traced")
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	ids := strings.Fields(out)
	if len(ids) != 2 {
		t.Fatalf("detach printed %q", out)
	}
	if _, stderr, code := e.weft("", "--host", addr, "attach", ids[1]); code != 0 {
		t.Fatalf("attach: %d %s", code, stderr)
	}
	var traceID string
	for _, ev := range e.events(ids[0]) {
		if ev.Type == event.RunStarted {
			var d event.RunStartedData
			ev.Decode(&d)
			traceID = d.TraceID
		}
	}
	if len(traceID) != 32 {
		t.Fatalf("run.started trace ID %q", traceID)
	}
	if out, _, _ := e.weft("", "--host", addr, "status", ids[1]); !strings.Contains(out, " trace="+traceID) {
		t.Errorf("weft status: %q, want trace=%s", out, traceID)
	}
	if !poll(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(traces[traceID], ","), "invoke_agent weft")
	}) {
		mu.Lock()
		t.Fatalf("the run's trace %s did not arrive: %v", traceID, traces)
	}

	get := func(url, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := get("http://"+addr+"/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", status)
	}
	if status, _ := get("http://"+addr+"/metrics", "wrong"); status != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", status)
	}
	for _, url := range []string{"http://" + addr + "/metrics", "http://" + maddr + "/metrics"} {
		tok := e.token()
		if strings.Contains(url, maddr) {
			tok = ""
		}
		status, body := get(url, tok)
		if status != 200 {
			t.Fatalf("%s: %d %s", url, status, body)
		}
		for _, want := range []string{
			"weft_sessions_loaded 1\n", `weft_runs_ended_total{status="completed"} 1` + "\n", "weft_runs_started_total 1\n",
			`weft_runs_active{state="running"} 0` + "\n", "weft_runs_queued 0\n", "# TYPE weft_store_append_seconds histogram\n",
			`weft_store_append_seconds_bucket{le="+Inf"} `, "weft_trace_spans_dropped_total 0\n", "weft_lease_takeovers_total 0\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q:\n%s", url, want, body)
			}
		}
	}
}
