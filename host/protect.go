package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// protectMounts refuses, for a remote client (api.Client.Remote), the
// local mounts whose path reaches what the host keeps from sessions
// (Config.Protected), and stores the others with their symbolic links
// resolved, so that the directory checked is the one a binding opens.
// field names the mounts ("mounts[%d]" formats an index in). Scratch
// mounts are the host's own. Errors are Denied, with "field" the
// mount's path.
func (h *Host) protectMounts(ctx context.Context, field string, mounts []event.Mount) error {
	if !api.ClientFrom(ctx).Remote() {
		return nil
	}
	for i := range mounts {
		m := &mounts[i]
		if m.Kind == event.KindScratch || !filepath.IsAbs(m.Path) {
			continue // a scratch mount's path is the host's; a relative one is refused later
		}
		f := field
		if strings.Contains(f, "%d") {
			f = fmt.Sprintf(f, i)
		}
		real, err := h.cfg.Protected.Check(m.Path)
		if err != nil {
			return protectedErr(f+".path", err).With("mountId", m.ID)
		}
		m.Path = real
	}
	return nil
}

// protectServers refuses, for a remote client, the MCP servers whose
// readOnly paths or command reach what the host keeps from sessions. The
// MCP client checks them again when it starts them (links may change).
func (h *Host) protectServers(ctx context.Context, servers map[string]event.MCPServer) error {
	if !api.ClientFrom(ctx).Remote() {
		return nil
	}
	for name, s := range servers {
		if filepath.IsAbs(s.Command) {
			if _, err := h.cfg.Protected.Check(s.Command); err != nil {
				return protectedErr("mcpServers."+name+".command", err)
			}
		}
		for i, p := range s.ReadOnly {
			if _, err := h.cfg.Protected.Check(p); errors.Is(err, env.ErrProtected) {
				return protectedErr(fmt.Sprintf("mcpServers.%s.readOnly[%d]", name, i), err)
			}
		}
	}
	return nil
}

func protectedErr(field string, err error) *api.Error {
	return api.Wrap(api.KindDenied, err, "%s: %v", field, err).With("field", field)
}
