package sandbox

// DefaultLimits are the limits of commands when the host's configuration
// sets none (docs/config.md): command for each command's tree, session
// for all the running commands of one session together and host for
// every command of the host together. They let real builds and test
// suites run — thousands of processes, half the machine's memory for one
// command — and end a fork bomb, a memory hog or a runaway file before
// the machine does: the host's commands together leave an eighth of the
// memory to weft and the rest of the machine. CPU time is not limited
// (a long build or a server may use hours); the CPU controller gives
// each session's commands one share beside the host's own threads.
// memory is the machine's memory in bytes, 0 when unknown (no memory
// limits then).
func DefaultLimits(memory int64) (command, session, host Limits) {
	command = Limits{Processes: 4096, Memory: memory / 2, FileSize: 16 << 30}
	session = Limits{Processes: 8192, Memory: memory / 4 * 3}
	host = Limits{Processes: 16384, Memory: memory / 8 * 7}
	return command, session, host
}
