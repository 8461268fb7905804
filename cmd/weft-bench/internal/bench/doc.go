// Package bench measures weft's performance figures on the machine it runs
// on — the suite of the "Performance" issue — and holds each figure's
// measurement in one place, for the weft-bench command and for the go
// test benchmarks alike. It lives under cmd/weft-bench so that the
// product binary cannot link it.
//
// [Run] runs the figures that [Config.Only] selects, each with its own
// target, and returns a [Report]: a table of results with verdicts (met,
// missed, skipped, failed), printable as text or JSON, and the latency
// distributions behind them, which [Report.WritePlots] draws as PNG files
// with gonum.org/v1/plot.
//
// Figures about one process's internals (run start, idle sessions,
// fan-out, appends, the shell sandbox) run through weft's public Go API in
// this process; the wire fan-out's subscribers run in this program
// re-executed ([ClientsArg]), so that the host's CPU is its own and the
// clients' decoding does not share its process. Figures about processes
// run real ones: the one-shot run
// executes the weft binary ([Config.Weft]) against the bench's own
// loopback model server, the warm turns drive a `weft rpc` child over
// stdio JSON-RPC as an outside client would, host memory is read from a
// `weft serve` child's /proc entry, and the binary's size and start-up
// are those of that file. Where Codex is installed ([Config.Codex]) the
// same mock serves it, and `codex exec` and `codex app-server` are
// measured side by side with weft, interleaved; one line driver speaks to
// `weft rpc` and `codex app-server` alike, so that a warm turn is the
// same for both: from writing the request that starts it to reading the
// line of the notification that ends it, with the CPU of the server's
// process tree.
//
// The bench cleans up after itself: temporary directories are removed and
// every child process (in its own process group, with a parent-death
// signal) is killed on every exit path, including a cancelled context.
package bench
