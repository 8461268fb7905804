package host

import (
	"context"
	"errors"
	"strings"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/mcp"
)

// mcpScope returns what an MCP request reaches: the host's MCP client,
// and with sessionID the session's own servers and binding.
func (h *Host) mcpScope(ctx context.Context, sessionID string) (*mcp.Manager, map[string]event.MCPServer, *env.Binding, error) {
	if h.cfg.MCP == nil {
		return nil, nil, nil, api.Errorf(api.KindNotFound, "this host has no MCP client (no MCP servers are configured)")
	}
	if sessionID == "" {
		return h.cfg.MCP, nil, nil, nil
	}
	var servers map[string]event.MCPServer
	var b *env.Binding
	err := h.with(ctx, sessionID, func(s *session.Session) error {
		var err error
		servers, b, err = s.MCPServers()
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return h.cfg.MCP, servers, b, nil
}

// mcpError maps an MCP request's failure: an unknown server is
// not_found; a server that failed, or refused the request, is
// environment_unavailable, with its message.
func mcpError(server string, err error) error {
	var ae *api.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, mcp.ErrNoServer):
		return api.Wrap(api.KindNotFound, err, "%v", err).With("server", server)
	}
	return api.Wrap(api.KindEnvironmentUnavailable, err, "%v", err).With("server", server)
}

// MCPResources lists the resources of the MCP servers ([api.MCPResources]).
func (h *Host) MCPResources(ctx context.Context, p api.MCPListParams) (*api.MCPResourcesResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, servers, b, err := h.mcpScope(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	res, err := m.Resources(ctx, p.Server, servers, b)
	return res, mcpError(p.Server, err)
}

// MCPReadResource reads a resource of an MCP server ([api.MCPReadResource]).
func (h *Host) MCPReadResource(ctx context.Context, p api.MCPReadResourceParams) (*api.MCPReadResourceResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, servers, b, err := h.mcpScope(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	res, err := m.ReadResource(ctx, p.Server, p.URI, servers, b)
	return res, mcpError(p.Server, err)
}

// MCPPrompts lists the prompts of the MCP servers ([api.MCPPrompts]).
func (h *Host) MCPPrompts(ctx context.Context, p api.MCPListParams) (*api.MCPPromptsResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, servers, b, err := h.mcpScope(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	res, err := m.Prompts(ctx, p.Server, servers, b)
	return res, mcpError(p.Server, err)
}

// MCPGetPrompt gets a prompt of an MCP server ([api.MCPGetPrompt]).
func (h *Host) MCPGetPrompt(ctx context.Context, p api.MCPGetPromptParams) (*api.MCPGetPromptResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m, servers, b, err := h.mcpScope(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	res, err := m.GetPrompt(ctx, p.Server, p.Name, p.Arguments, servers, b)
	return res, mcpError(p.Server, err)
}

// toolsFor returns the tools a call of session sessionID may name: the
// host's (Config.Tools) and the MCP servers' of the host's configuration
// and, with a session, the session's own, started if they are not
// running. A server that fails is named in failed; its tools are left
// out but for those it listed last, which answer with its error.
func (h *Host) toolsFor(ctx context.Context, sessionID string) (reg *tool.Registry, failed []api.MCPServerFailure, err error) {
	if h.cfg.MCP == nil {
		return h.cfg.Tools, nil, nil
	}
	m, servers, b, err := h.mcpScope(ctx, sessionID)
	if err != nil {
		return nil, nil, err
	}
	mreg, terr := m.Tools(ctx, servers, b)
	if terr != nil {
		errs := []error{terr}
		if j, ok := terr.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			var se *mcp.ServerError
			if errors.As(e, &se) {
				failed = append(failed, api.MCPServerFailure{Server: se.Server, Error: se.Error()})
			}
		}
	}
	reg, err = tool.Merge(h.cfg.Tools, mreg)
	if err != nil {
		return nil, nil, apiError(err)
	}
	return reg, failed, nil
}

// isMCPTool reports whether name is an MCP server's tool's name
// (mcp__<server>__<tool>): the only ones toolsFor must start servers
// for.
func isMCPTool(name string) bool { return strings.HasPrefix(name, "mcp__") }
