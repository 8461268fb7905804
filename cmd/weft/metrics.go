package main

import (
	"bufio"
	"net/http"
	"strconv"

	"weft.dev/weft/host"
	"weft.dev/weft/internal/telemetry"
)

// metricsHandler serves the host's metrics, and the trace spans that
// tracing delivered and dropped (nil tracing: none), in the Prometheus
// text exposition format (version 0.0.4), written by hand: the format is
// a few lines of text, and the client library or OpenTelemetry's
// Prometheus exporter would add megabytes to the binary for it.
func metricsHandler(h *host.Host, tracing *telemetry.Tracing) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		bw := bufio.NewWriter(w)
		writeMetrics(bw, h.Metrics(), tracing)
		bw.Flush()
	})
}

// writeMetrics writes m in the Prometheus text format.
func writeMetrics(w *bufio.Writer, m host.Metrics, tracing *telemetry.Tracing) {
	head := func(name, typ, help string) {
		w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
	}
	val := func(name, labels string, v uint64) {
		w.WriteString(name + labels + " " + strconv.FormatUint(v, 10) + "\n")
	}
	head("weft_sessions_loaded", "gauge", "Sessions loaded (owned) by this host.")
	val("weft_sessions_loaded", "", uint64(m.SessionsLoaded))
	head("weft_runs_active", "gauge", "Runs executing (running) or parked for answers (waiting) on this host.")
	val("weft_runs_active", `{state="running"}`, uint64(m.RunsRunning))
	val("weft_runs_active", `{state="waiting"}`, uint64(m.RunsWaiting))
	head("weft_runs_queued", "gauge", "Runs queued behind the active runs of the loaded sessions (queue depth).")
	val("weft_runs_queued", "", uint64(m.RunsQueued))
	head("weft_subscribers", "gauge", "Live subscriptions to the loaded sessions' logs.")
	val("weft_subscribers", "", uint64(m.Subscribers))
	head("weft_runs_started_total", "counter", "Runs this host started.")
	val("weft_runs_started_total", "", m.RunsStarted)
	head("weft_runs_ended_total", "counter", "Runs this host ended, by terminal status.")
	for _, st := range []string{"completed", "failed", "cancelled", "interrupted"} {
		val("weft_runs_ended_total", `{status="`+st+`"}`, m.RunsEnded[st])
	}
	head("weft_lease_takeovers_total", "counter", "Sessions this host took over after another holder's lease expired.")
	val("weft_lease_takeovers_total", "", m.LeaseTakeovers)
	head("weft_leases_lost_total", "counter", "Sessions this host dropped because their lease moved or could not be renewed.")
	val("weft_leases_lost_total", "", m.LeasesLost)
	head("weft_store_append_seconds", "histogram", "Latency of the store's append transactions.")
	var cum uint64
	for i, b := range m.AppendLatency.Bounds {
		cum += m.AppendLatency.Counts[i]
		val("weft_store_append_seconds_bucket", `{le="`+strconv.FormatFloat(b.Seconds(), 'g', -1, 64)+`"}`, cum)
	}
	cum += m.AppendLatency.Counts[len(m.AppendLatency.Bounds)]
	val("weft_store_append_seconds_bucket", `{le="+Inf"}`, cum)
	w.WriteString("weft_store_append_seconds_sum " + strconv.FormatFloat(m.AppendLatency.Sum.Seconds(), 'g', -1, 64) + "\n")
	val("weft_store_append_seconds_count", "", cum)
	head("weft_trace_spans_dropped_total", "counter", "Trace spans never delivered: the export queue was full or the OTLP endpoint failed.")
	val("weft_trace_spans_dropped_total", "", tracing.Dropped())
	head("weft_trace_spans_exported_total", "counter", "Trace spans delivered to the OTLP endpoint.")
	val("weft_trace_spans_exported_total", "", tracing.Exported())
}
