package api

import (
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// ForkSessionParams are the params of session/fork: a new session whose
// history is the source's up to AtSeq.
type ForkSessionParams struct {
	// SessionID is the session to fork.
	SessionID string `json:"sessionId"`
	// AtSeq is the last of the source's events the fork keeps; zero means
	// the source's last event. A seq inside a run's step is moved back to
	// the step boundary before it (the result's atSeq says where the fork
	// starts); a seq beyond the source's log is -32016.
	AtSeq int64 `json:"atSeq,omitempty"`
	// Title is the fork's title; nil means the source's.
	Title *string `json:"title,omitempty"`
	// Mounts, if set, are the fork's mounts, as in session/create, instead
	// of the source's. Without them the fork takes the source's mounts:
	// local directories are shared (the result's sharedMounts lists the
	// read-write ones), scratch mounts are copied into the fork's own
	// scratch directory.
	Mounts         []event.Mount `json:"mounts,omitempty"`
	IdempotencyKey string        `json:"idempotencyKey,omitempty"`
}

// Validate checks the source's ID, the seq, the title's size and the
// mounts' IDs.
func (p ForkSessionParams) Validate() error {
	err := firstError(
		checkKey(p.IdempotencyKey),
		required("sessionId", p.SessionID),
		checkID("sessionId", p.SessionID),
		checkMounts("mounts", p.Mounts),
	)
	switch {
	case err != nil:
		return err
	case p.AtSeq < 0:
		return InvalidParam("atSeq", "atSeq %d: want a seq of the source's log, or 0 for its last event", p.AtSeq)
	case p.Title != nil:
		return checkSize("title", len(*p.Title), MaxTitleBytes)
	}
	return nil
}

// ForkResult is the fork that session/fork created.
type ForkResult struct {
	// Session is the fork's record; Session.Fork names its source and
	// the seq it starts from.
	Session record.Session `json:"session"`
	// AtSeq is the last of the source's events the fork holds: the seq
	// asked for, or the step boundary before it.
	AtSeq int64 `json:"atSeq"`
	// SharedMounts are the fork's read-write mounts whose directory the
	// source uses too: a write, or a rewind of the files, through one
	// session changes the other's files.
	SharedMounts []string `json:"sharedMounts,omitempty"`
	Replayed     bool     `json:"replayed,omitempty"`
}

// RewindParams are the params of session/rewind.
type RewindParams struct {
	SessionID string `json:"sessionId"`
	// ToSeq is the seq to rewind to: later runs see the conversation as
	// it was after this event. It must be a seq of this session's log at
	// a step boundary, after any compaction.
	ToSeq int64 `json:"toSeq"`
	// Files also restores the session's read-write mounts to their state
	// at ToSeq, from the checkpoints taken before each step that may
	// write (docs/protocol.md, "Rewind").
	Files          bool   `json:"files,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks the session's ID and the seq.
func (p RewindParams) Validate() error {
	err := firstError(
		checkKey(p.IdempotencyKey),
		required("sessionId", p.SessionID),
		checkID("sessionId", p.SessionID),
	)
	if err == nil && p.ToSeq < 1 {
		return InvalidParam("toSeq", "toSeq %d: want a seq of the session's log", p.ToSeq)
	}
	return err
}

// RewindResult is what session/rewind did.
type RewindResult struct {
	// ToSeq is the seq rewound to: the one asked for, or the step
	// boundary before it.
	ToSeq int64 `json:"toSeq"`
	Files bool  `json:"files,omitempty"`
	// Restored are the files put back as they were (created files
	// removed, modified and deleted ones written back, modes restored),
	// as mount-relative paths prefixed with the mount's ID, at most
	// MaxRewindPaths of them; RestoredCount counts them all.
	Restored      []string `json:"restored,omitempty"`
	RestoredCount int      `json:"restoredCount,omitempty"`
	Replayed      bool     `json:"replayed,omitempty"`
}

// MaxRewindPaths bounds the paths a [RewindResult] lists.
const MaxRewindPaths = 1000
