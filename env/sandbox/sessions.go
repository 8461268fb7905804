package sandbox

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
)

// SessionsConfig configures [NewSessions]. Zero fields mean no limit of
// their kind.
type SessionsConfig struct {
	// Session bounds all the running commands of one session together:
	// their processes and their memory. (CPU time and file size are
	// bounded per command, [Config.Limits].)
	Session Limits
	// Host bounds all the running commands of every session together.
	Host Limits
	// MaxIdle is how many sessions without a running command keep what
	// they share (a network namespace is some tens of kilobytes of kernel
	// memory), the most recently used; a session that runs a command
	// again after losing it gets a new one. Zero means 64; negative
	// keeps none.
	MaxIdle int
}

// Sessions keeps what the commands of each session share, so that it is
// made once per session rather than once per command:
//
//   - with the network denied, a network namespace whose only interface
//     is its loopback: a session's background server on 127.0.0.1 is
//     reachable from its other commands, and from nothing else — not
//     the host, not another session;
//   - a cgroup holding the cgroups of its commands' trees, which bounds
//     them together ([SessionsConfig.Session]), under one of all the
//     host's commands ([SessionsConfig.Host]); each is one scheduling
//     entity, so that no session's commands starve the host or the
//     others of CPU.
//
// Commands name their session in [Policy.Session]; [Config.Sessions]
// points at the Sessions of the host. A network namespace is prepared
// only where this process may make one and a command may join it (as
// root); elsewhere each command gets its own (see docs/sandbox.md).
// Cgroups are made only where this process may make them ([Status]
// says).
//
// A Sessions is safe for concurrent use. Close it when no command runs
// any more; it makes nothing until a command needs it.
type Sessions struct {
	cfg SessionsConfig

	mu     sync.Mutex
	closed bool
	seq    int                      // names each session's cgroup uniquely
	byID   map[string]*sessionState // sessions with state, running or idle
	idle   *list.List               // of *sessionState without a running command, most recent first
	host   hostGroup
}

// sessionState is what one session's commands share. Its fields are
// made on first use, under mu, so that one session's set-up never
// stalls another's.
type sessionState struct {
	id   string
	name string        // of its cgroup
	refs int           // running commands; guarded by Sessions.mu
	elem *list.Element // in Sessions.idle when refs is 0; guarded by Sessions.mu

	mu     sync.Mutex
	netns  int // descriptor of the network namespace; -1 before it is made
	netErr error
	cg     *cgroupNode
	cgErr  error
	gone   bool // destroyed: the state is no longer the session's
}

// NewSessions returns a Sessions configured by cfg, which it checks. It
// makes nothing yet.
func NewSessions(cfg SessionsConfig) (*Sessions, error) {
	if err := cfg.Session.validate("session"); err != nil {
		return nil, err
	}
	if err := cfg.Host.validate("host"); err != nil {
		return nil, err
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = 64
	}
	return &Sessions{cfg: cfg, byID: map[string]*sessionState{}, idle: list.New()}, nil
}

// Config returns the configuration the Sessions was made with (MaxIdle
// completed).
func (s *Sessions) Config() SessionsConfig { return s.cfg }

// errSessionsClosed is returned for a command started after Close.
var errSessionsClosed = errors.New("sandbox: Sessions closed")

// acquire returns session id's state for a command about to start, which
// calls release when it has ended.
func (s *Sessions) acquire(id string) (*sessionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errSessionsClosed
	}
	st := s.byID[id]
	if st == nil {
		s.seq++
		st = &sessionState{id: id, name: fmt.Sprintf("s%d", s.seq), netns: -1}
		s.byID[id] = st
	}
	if st.elem != nil {
		s.idle.Remove(st.elem)
		st.elem = nil
	}
	st.refs++
	return st, nil
}

// release ends a command's use of st. A session left without a running
// command becomes idle; the least recently used idle ones beyond
// MaxIdle, and every one after Close, lose their state.
func (s *Sessions) release(st *sessionState) {
	var drop []*sessionState
	s.mu.Lock()
	st.refs--
	if st.refs == 0 {
		st.elem = s.idle.PushFront(st)
		for s.idle.Len() > max(s.cfg.MaxIdle, 0) || (s.closed && s.idle.Len() > 0) {
			old := s.idle.Remove(s.idle.Back()).(*sessionState)
			old.elem = nil
			delete(s.byID, old.id)
			drop = append(drop, old)
		}
	}
	last := s.closed && len(s.byID) == 0
	s.mu.Unlock()
	for _, old := range drop {
		old.destroy()
	}
	if last {
		s.host.remove()
	}
}

// Close ends the state of every session without a running command, and
// of the others once their last command ends; it returns the first
// error removing their cgroups. Commands that start afterwards with
// these Sessions fail. Close may be called more than once.
func (s *Sessions) Close() error {
	s.mu.Lock()
	s.closed = true
	var drop []*sessionState
	for s.idle.Len() > 0 {
		old := s.idle.Remove(s.idle.Back()).(*sessionState)
		old.elem = nil
		delete(s.byID, old.id)
		drop = append(drop, old)
	}
	last := len(s.byID) == 0
	s.mu.Unlock()
	var errs []error
	for _, old := range drop {
		errs = append(errs, old.destroy())
	}
	if last {
		errs = append(errs, s.host.remove())
	}
	return errors.Join(errs...)
}

// hostGroup is the cgroup of all the host's commands, made on first use.
type hostGroup struct {
	mu   sync.Mutex
	node *cgroupNode
	err  error
	made bool
}
