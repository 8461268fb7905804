package api

import "time"

// MethodSessionPrune runs a retention pass of the host now.
const MethodSessionPrune = "session/prune"

// MaxPruneList is the most sessions a [PruneResult] lists in each of
// Purged and Skipped; the counts go on past it.
const MaxPruneList = 1000

// PruneParams are the params of session/prune.
type PruneParams struct {
	// DryRun lists what the pass would purge and remove, and removes
	// nothing.
	DryRun bool `json:"dryRun,omitempty"`
}

// Validate accepts every PruneParams.
func (p PruneParams) Validate() error { return nil }

// PruneResult is the result of session/prune: what one retention pass
// purged (with DryRun, would purge) under the host's policy, and what the
// sweep of checkpoint blobs that follows it removed.
type PruneResult struct {
	DryRun bool `json:"dryRun,omitempty"`
	// Policy is the host's retention policy (the config file's
	// retention); all zero purges no session.
	Policy RetentionPolicy `json:"policy"`
	// Purged are the sessions purged (the first MaxPruneList of
	// PurgedCount), newest first.
	Purged      []PrunedSession `json:"purged"`
	PurgedCount int             `json:"purgedCount"`
	// Skipped are the sessions the policy selects that the pass left (the
	// first MaxPruneList of SkippedCount): one with work left (a running
	// process, a run admitted meanwhile, another host's lease) or the
	// source of a fork that stays.
	Skipped      []SkippedSession `json:"skipped,omitempty"`
	SkippedCount int              `json:"skippedCount,omitempty"`
	// Blobs is the sweep of the checkpoint blobs; nil without a
	// checkpoint directory.
	Blobs *BlobSweep `json:"blobs,omitempty"`
}

// RetentionPolicy is a host's retention policy: durations as Go writes
// them ("720h0m0s"), empty or zero for a rule that is off.
type RetentionPolicy struct {
	MaxAge       string `json:"maxAge,omitempty"`
	MaxSessions  int    `json:"maxSessions,omitempty"`
	DeletedAfter string `json:"deletedAfter,omitempty"`
}

// PrunedSession is a session a retention pass purged.
type PrunedSession struct {
	SessionID string `json:"sessionId"`
	Title     string `json:"title,omitempty"`
	// Reason is why: age (no event for longer than maxAge), count (older
	// than the newest maxSessions) or deleted (deleted longer than
	// deletedAfter ago).
	Reason  string    `json:"reason"`
	Deleted bool      `json:"deleted,omitempty"`
	LastAt  time.Time `json:"lastAt"`
}

// SkippedSession is a session a retention pass selected and left.
type SkippedSession struct {
	SessionID string `json:"sessionId"`
	Reason    string `json:"reason"`
	// Error says why it was left.
	Error string `json:"error"`
}

// BlobSweep is what a sweep of the checkpoint blobs did.
type BlobSweep struct {
	// Removed and RemovedBytes count the blobs no remaining session's
	// checkpoints reference that were removed (DryRun: would be).
	Removed      int   `json:"removed"`
	RemovedBytes int64 `json:"removedBytes"`
	// Kept counts the blobs left.
	Kept int `json:"kept"`
	// Error, if set, says why the sweep stopped; what it removed before
	// stays removed.
	Error string `json:"error,omitempty"`
}
