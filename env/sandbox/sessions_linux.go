package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// allControllers are the controllers of a host's and a session's groups:
// every one a command's group may use beneath them.
var allControllers = []string{ctrlPids, ctrlMemory, ctrlCPUAcct, ctrlCPU}

// get returns the host's group, made the first time under this
// process's own cgroups with limits l, or the error of making it.
func (h *hostGroup) get(r *cgroupRoot, l Limits) (*cgroupNode, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.made {
		h.made = true
		h.node, h.err = r.rootNode().child(r, fmt.Sprintf("weft-%d-%d", os.Getpid(), selfStart()), allControllers, l)
	}
	return h.node, h.err
}

// remove removes the host's group, if it was made.
func (h *hostGroup) remove() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.node == nil {
		return nil
	}
	err := h.node.remove()
	h.node, h.made = nil, false
	return err
}

// netnsFD returns the descriptor of the session's network namespace,
// made the first time. The caller holds a reference (acquire), so the
// descriptor stays open until it releases it.
func (st *sessionState) netnsFD() (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone {
		return -1, errSessionsClosed
	}
	if st.netns < 0 && st.netErr == nil {
		st.netns, st.netErr = newLoopbackNetns()
	}
	return st.netns, st.netErr
}

// group returns the session's cgroup, made the first time beneath the
// host's, or nil where this process makes no cgroups.
func (s *Sessions) group(st *sessionState) (*cgroupNode, error) {
	r := cgroups()
	if len(r.own) == 0 {
		return nil, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone {
		return nil, errSessionsClosed
	}
	if st.cg == nil && st.cgErr == nil {
		host, err := s.host.get(r, s.cfg.Host)
		if err != nil {
			st.cgErr = err
		} else {
			st.cg, st.cgErr = host.child(r, st.name, allControllers, s.cfg.Session)
		}
	}
	return st.cg, st.cgErr
}

// destroy closes the session's network namespace and removes its cgroup;
// no command of it runs.
func (st *sessionState) destroy() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.gone = true
	if st.netns >= 0 {
		unix.Close(st.netns)
		st.netns = -1
	}
	var err error
	if st.cg != nil {
		err = st.cg.remove()
		st.cg = nil
	}
	return errors.Join(err)
}
