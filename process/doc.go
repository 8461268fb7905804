// Package process runs weft's durable background processes: shell
// commands and tool calls that outlive the step, the run and the client
// connection that started them, addressed by a [Handle]
// {"__handle__":"process","id":…}.
//
// A [Manager] keeps one record per process (store.Process, the registry)
// and one log per process (store.ProcessEvent, its own gap-free seq):
// process.started, process.output chunks, signal.<name>,
// process.cancel_requested, process.access_denied, grants, and exactly one
// terminal event (process.completed|failed|cancelled|abandoned) with its
// evidence. The session log only carries summaries, written by the host
// when the [Notifier] tells it that a process ended.
//
// Shell processes run as Shell -c COMMAND in a process group of their own
// with Pdeathsig (SIGKILL) on Linux, in a working directory resolved
// through an env.Binding (it must lie in a read-write mount), with an
// environment scrubbed to an allow-list plus explicit variables plus
// [MarkerEnv]. Output (stdout and stderr, or a pty) is captured into the
// log in chunks of at most Config.ChunkBytes, coalesced for
// Config.FlushInterval; offsets count the bytes of all streams together.
// Memory per process is bounded (a few read buffers and one chunk); the
// log keeps at most Config.OutputCap bytes of output, dropping the oldest
// chunks with a process.output_dropped marker while offsets stay valid.
//
// Tool processes run a tool call through the host's [ToolRunner] on a
// goroutine the Manager owns; the result becomes output and the terminal
// event.
//
// Visibility ([Caller.CanSee]): the owning session, the creating run and
// sessions holding a grant address a process; to anyone else it does not
// exist ([ErrNotFound]). Cancels pass a [CancelPolicy]. Denied attempts on
// await, signal, write, grant and cancel are recorded in the process log.
//
// After a crash, [Manager.Recover] reconciles by disposition: it sweeps
// each recorded process group (killing members that carry the process's
// marker), marks owner_bound processes abandoned with evidence, reruns
// rerunnable tool processes and leaves externally_owned ones alone.
//
// The package is Unix-only (process groups, signals, ptys); the group
// sweep reads /proc on Linux.
package process
