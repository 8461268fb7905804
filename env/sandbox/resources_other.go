//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"runtime"
)

// Off Linux commands run unsandboxed and directly: there are no cgroups,
// network namespaces or resource limits to apply.

type cgroupNode struct{}

type counters struct{}

func (h *hostGroup) remove() error { return nil }

func (st *sessionState) destroy() error { return nil }

func limitMechanisms(Limits) LimitMechanisms { return LimitMechanisms{} }

func networkDeniedBy(uintptr, bool) string { return "" }

func netCloneFlags(*Status, uintptr) uintptr { return 0 }

func (c *Cmd) prepareResources() error { return nil }

func (c *Cmd) releaseNetFD() {}

func (c *Cmd) closeResources() error { return nil }

func (c *Cmd) needsWatch() bool { return false }

func (c *Cmd) watch(int) {}

func (c *Cmd) exceeded() *LimitError { return nil }

func (c *Cmd) treeDirs() []string { return nil }

func (c *Cmd) rlimits() []wireRlimit { return nil }

func dupFile(int, string) (*os.File, error) {
	return nil, errors.New("no network namespaces on " + runtime.GOOS)
}

func removeStaleCgroups() error { return nil }
