package env

import (
	"fmt"

	"weft.dev/weft/event"
)

// OnlyWritable returns a view of b in which mount id is the only
// writable mount: every other mount is read-only, and id is the shell
// mount. A policy that allows a shell command by a rule with a mount
// condition runs it with such a view, so that the command can change
// only that mount; the shell sandbox enforces the modes the view's
// [Binding.Mounts] report (see sandbox.ForBinding).
//
// The view shares b's open mounts: it is valid as long as b is, and its
// Close closes nothing. It fails with an error wrapping [ErrNoMount] when
// id is not a mount of b, and [ErrReadOnly] when it is read-only.
func (b *Binding) OnlyWritable(id string) (*Binding, error) {
	m, ok := b.byIDOrNil(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q (mounts: %s)", ErrNoMount, id, b.mountList())
	}
	if m.m.Mode != event.ModeReadWrite {
		return nil, fmt.Errorf("%w: mount %q", ErrReadOnly, id)
	}
	v := &Binding{guard: b.guard, view: true, narrowed: true, version: b.version, byID: make(map[string]*mount, len(b.mounts)), network: b.network, limits: b.limits, session: b.session}
	for _, x := range b.mounts {
		c := *x
		c.m = cloneMount(x.m)
		if x != m {
			c.m.Mode = event.ModeReadOnly
		}
		c.m.DefaultForShell = x == m
		v.mounts = append(v.mounts, &c)
		v.byID[c.m.ID] = &c
		v.snapshot = append(v.snapshot, cloneMount(c.m))
		if x == b.def {
			v.def = &c
		}
		if x == m {
			v.shell = &c
		}
	}
	return v, nil
}

// Narrowed returns the one writable mount of a view made by
// [Binding.OnlyWritable], and false for any other Binding.
func (b *Binding) Narrowed() (string, bool) {
	if b == nil || !b.narrowed || b.shell == nil {
		return "", false
	}
	return b.shell.m.ID, true
}

// byIDOrNil returns the mount id of b; a nil b has none.
func (b *Binding) byIDOrNil(id string) (*mount, bool) {
	if b == nil {
		return nil, false
	}
	m, ok := b.byID[id]
	return m, ok && m != nil
}
