// Package process runs weft's durable background processes: shell
// commands and tool calls that outlive the step, the run and the client
// connection that started them, addressed by a [Handle]
// {"__handle__":"process","id":…}.
//
// A [Manager] keeps one record per process (record.Process, the registry)
// and one log per process (record.ProcessEvent, its own gap-free seq):
// process.started, process.output chunks, signal.<name>,
// process.cancel_requested, process.access_denied, grants, and exactly one
// terminal event (process.completed|failed|cancelled|abandoned) with its
// evidence. The session log only carries summaries, written by the host
// when the [Notifier] tells it that a process ended.
//
// Shell processes run as Shell -c COMMAND in a working directory resolved
// through an env.Binding (it must lie in a read-write mount), with an
// environment scrubbed to an allow-list plus explicit variables plus
// [MarkerEnv]. With Config.Sandbox set (the weft host always sets it) they
// run under the sandbox helper, which contains the shell's whole tree (a
// PID namespace, or a subreaper; see env/sandbox): cancel, a kill signal,
// Close and the host's death end everything the shell started, setsid and
// double-forked processes included, and what a shell leaves running in
// the background dies when it exits. Without it a shell leads a process
// group of its own with Pdeathsig (SIGKILL) on Linux, and only that group
// is stopped. Output (stdout and stderr, or a pty) is captured into the
// log in chunks of at most Config.ChunkBytes, coalesced for
// Config.FlushInterval; offsets count the bytes of all streams together.
// Memory per process is bounded (a few read buffers and one chunk); the
// log keeps at most Config.OutputCap bytes of output, dropping the oldest
// chunks with a process.output_dropped marker while offsets stay valid.
//
// Output is never skipped silently. While the store refuses writes, it is
// held in memory (Config.OutageBuffer, host-wide) and written in order
// when the store is back; what the bound cannot hold is dropped oldest
// first and written in its place as one process.output_lost range, which
// every reader ([Manager.Output], [Manager.Follow], the process tools)
// shows where the output was lost and the record counts (DroppedBytes,
// LostBytes). A process that ends during an outage keeps trying to write
// its end, and the [Notifier] hears of it only once it is committed.
//
// Tool processes run a tool call through the host's [ToolRunner] on a
// goroutine the Manager owns; the result becomes output and the terminal
// event.
//
// Subagent processes (kind record.ProcessAgent) run a child session's run
// through the host's [AgentRunner] on a goroutine the Manager owns: the
// child's streamed text becomes output (stream "agent"), its final answer
// the record's Result, and a child that does not complete a typed
// Failure. [Manager.Write] steers the child, [Manager.Cancel] cancels it
// (the runner's ctx ends with cause [ErrCancelled]); Close leaves it for
// the next host, whose Recover follows it again whatever its disposition.
//
// Visibility ([Caller.CanSee]): the owning session, the creating run and
// sessions holding a grant address a process; to anyone else it does not
// exist ([ErrNotFound]). Cancels pass a [CancelPolicy]. Denied attempts on
// await, signal, write, grant and cancel are recorded in the process log.
//
// After a crash, [Manager.Recover] reconciles by disposition: it sweeps
// what is left of each recorded shell (killing the processes that carry
// its marker), marks owner_bound processes abandoned with evidence, reruns
// rerunnable tool processes and leaves externally_owned ones alone; it
// also removes the temporary directories dead weft processes left.
//
// The package is Unix-only (process groups, signals, ptys); the sweep
// reads /proc on Linux.
package process
