// Package sim is a deterministic simulation of weft's session owner,
// journal and store. It holds only tests: go test ./internal/sim.
//
// Each seed drives the real engine in process (host.Host over
// host/internal/session and host/internal/journal, on store/memory or, for a few
// seeds, store/sqlite) inside a testing/synctest bubble, with a model,
// tools and a store the seed controls: the model streams text, tool calls,
// retryable errors and cut streams one chunk per step; a tool call ends
// when the driver says so; the store refuses writes (a full disk, one I/O
// error, a commit whose answer is lost), holds commits across steps, and
// crashes between any two appends, after which the host is closed and a
// new one recovers the same store. A client issues random commands:
// session/create, run/start under every busy policy, with idempotency keys
// (exact and conflicting retries), run/steer, run/cancel, approval/decide
// (double answers and races), input/answer, tool/result, run/wait,
// events/read and subscriptions.
//
// The driver applies one step at a time and waits until every goroutine
// of the bubble is blocked before the next, so that a seed always takes
// the same path: every random choice comes from the seed, fake time moves
// only when a step advances it, and nothing the engine does runs
// concurrently with anything else the step did not start. After every
// step it checks the invariants (see check_test.go): each session's log
// is contiguous from 1 and never rewritten, the stored records equal the
// projection of the log, every acknowledged command is applied exactly
// once, every run ends with its terminal event last and nothing stays
// running that nothing drives, every tool call and every request is
// closed once its run has ended, a gated tool ran at most once and only
// when allowed, and subscribers received exactly the committed events in
// order.
//
//	go test ./internal/sim                         # 200 seeds × 200 steps
//	go test ./internal/sim -seeds 256 -steps 500   # longer, by hand
//	go test ./internal/sim -run TestSim -seed 17 -v  # one seed, with its trace
//
// A failure names the seed, the step and the invariant, with the end of
// the trace; -seed N reproduces it exactly.
package sim
