package session

// Retire closes the session for a purge of its log, unless it has a run
// (active or queued): its journal closes, which ends its subscriptions,
// and it releases its lease, so that the store may remove what it owned.
// It reports whether the session is closed (one closed already is). It
// waits for the session's lock, unlike [Session.UnloadIfIdle], and
// closes a session that has subscribers or was used a moment ago.
func (s *Session) Retire() bool {
	s.mu.Lock()
	if s.state != stateClosed && (s.active != nil || len(s.queue) > 0) {
		s.mu.Unlock()
		return false
	}
	if s.state != stateClosed {
		s.state = stateClosed
		s.cancel(ErrClosed)
	}
	s.mu.Unlock()
	s.finish()
	return true
}
