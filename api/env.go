package api

import "weft.dev/weft/event"

// Warning codes of [MountResult.Warnings].
const (
	// WarnNoActiveRun: injectContext was asked but no run was active; the
	// change applies to the session's next run.
	WarnNoActiveRun = "no_active_run"
	// WarnSteerFailed: the active run was finishing and took no steering.
	WarnSteerFailed = "steer_failed"
	// WarnShellDefaultDropped: a replacement made the shell default
	// read-only, so the shell default moved (or there is none now).
	WarnShellDefaultDropped = "shell_default_dropped"
)

// Environment is a session's binding as clients see it. An empty
// DefaultMountID means the binding has no mounts; an empty
// DefaultShellMountID means no read-write mount is the shell default.
type Environment struct {
	BindingVersion      int64         `json:"bindingVersion"`
	DefaultMountID      string        `json:"defaultMountId,omitempty"`
	DefaultShellMountID string        `json:"defaultShellMountId,omitempty"`
	Mounts              []event.Mount `json:"mounts"`
}

// ListEnvParams are the params of env/list.
type ListEnvParams struct {
	SessionID string `json:"sessionId"`
}

// Validate checks that the session is named.
func (p ListEnvParams) Validate() error {
	return required("sessionId", p.SessionID)
}

// ListEnvResult is a session's current binding.
type ListEnvResult struct {
	Environment
	// LatestEnvironmentCursor is the seq of the event that made the current
	// binding: the last mount.added or mount.removed, or session.created.
	LatestEnvironmentCursor int64 `json:"latestEnvironmentCursor"`
}

// MountParams are the params of env/mount.
type MountParams struct {
	SessionID string `json:"sessionId"`
	// Mount is the mount to attach. Kind defaults to local and Mode to rw;
	// the host fills in Path for scratch mounts.
	Mount event.Mount `json:"mount"`
	// Replace allows replacing a mount with the same ID, which keeps that
	// mount's default flags. Without it an existing ID is AlreadyExists.
	Replace bool `json:"replace,omitempty"`
	// ExpectedBindingVersion, if set, must be the session's current
	// binding version (else RunConflict).
	ExpectedBindingVersion *int64 `json:"expectedBindingVersion,omitempty"`
	// InjectContext steers the active run with an <environment-context/>
	// line describing the change.
	InjectContext  bool   `json:"injectContext,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Validate checks that the session is named, that the mount's ID is a
// slug ([a-z0-9][a-z0-9_-]*), and the idempotency key; the host checks
// the mount against the binding's rules and its file system.
func (p MountParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		required("sessionId", p.SessionID),
		checkMountID("mount.id", p.Mount.ID),
	)
}

// UnmountParams are the params of env/unmount.
type UnmountParams struct {
	SessionID string `json:"sessionId"`
	MountID   string `json:"mountId"`
	// NewDefaultMountID names the new default mount; required when MountID
	// is the default.
	NewDefaultMountID string `json:"newDefaultMountId,omitempty"`
	// NewDefaultShellMountID names a read-write mount to become the shell
	// default. When MountID is the shell default and this is empty, no
	// mount is flagged and the default mount takes it if it is read-write.
	NewDefaultShellMountID string `json:"newDefaultShellMountId,omitempty"`
	ExpectedBindingVersion *int64 `json:"expectedBindingVersion,omitempty"`
	InjectContext          bool   `json:"injectContext,omitempty"`
	IdempotencyKey         string `json:"idempotencyKey,omitempty"`
}

// Validate checks that the session and the mount are named, and the
// idempotency key.
func (p UnmountParams) Validate() error {
	return firstError(
		checkKey(p.IdempotencyKey),
		required("sessionId", p.SessionID),
		required("mountId", p.MountID),
		checkID("newDefaultMountId", p.NewDefaultMountID),
		checkID("newDefaultShellMountId", p.NewDefaultShellMountID),
	)
}

// Warning is a part of a mount change that did not happen, such as the
// steering of injectContext. It is safe to display.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// MountResult is the result of env/mount (with Mount) and env/unmount
// (with RemovedMount).
type MountResult struct {
	OperationID string `json:"operationId"`
	MountID     string `json:"mountId"`
	// Applied is false when the result is the replay of an earlier
	// request with the same idempotency key.
	Applied                     bool   `json:"applied"`
	PreviousBindingVersion      int64  `json:"previousBindingVersion"`
	BindingVersion              int64  `json:"bindingVersion"`
	PreviousDefaultMountID      string `json:"previousDefaultMountId,omitempty"`
	CurrentDefaultMountID       string `json:"currentDefaultMountId,omitempty"`
	PreviousDefaultShellMountID string `json:"previousDefaultShellMountId,omitempty"`
	CurrentDefaultShellMountID  string `json:"currentDefaultShellMountId,omitempty"`
	// Mount is the mount as attached, flags normalised (env/mount).
	Mount *event.Mount `json:"mount,omitempty"`
	// RemovedMount is the mount as it was before env/unmount.
	RemovedMount *event.Mount `json:"removedMount,omitempty"`
	// Environment is the binding after the change.
	Environment Environment `json:"environment"`
	// EventCursor is the seq of the mount.added or mount.removed event.
	EventCursor int64 `json:"eventCursor"`
	// SteeringCursor is the seq of the steer.accepted event of injectContext.
	SteeringCursor int64     `json:"steeringCursor,omitempty"`
	Warnings       []Warning `json:"warnings,omitempty"`
}
