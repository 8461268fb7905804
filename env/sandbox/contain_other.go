//go:build !linux

package sandbox

import (
	"errors"
	"fmt"
	"runtime"
)

// usesHelper reports whether commands run through the helper: not here,
// where only unsandboxed commands run, directly.
const usesHelper = false

// Containment returns [ContainmentNone]: process trees are contained on
// Linux only.
func Containment() (string, error) {
	return ContainmentNone, errors.New("containment is Linux-only; this is " + runtime.GOOS)
}

func (p *Policy) resolveContainment() (string, uintptr, error) {
	if p.Containment != "" {
		return "", 0, fmt.Errorf("sandbox: containment %q: containment is Linux-only; this is %s", p.Containment, runtime.GOOS)
	}
	return ContainmentNone, 0, nil
}

func (c *Cmd) onTerminal() bool { return false }

func (c *Cmd) contain() {}

func startsInit(mode string, flags uintptr, unsandboxed bool) bool { return false }

func (c *Cmd) prepareInit() {}

func (c *Cmd) startInit() error { return errors.New("sandbox: no init shell on " + runtime.GOOS) }

func (c *Cmd) killHelperTree() error { return c.Process.Kill() }

func waitExited(pid int) {}

const killTreeLimit = 0
