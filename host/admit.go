package host

import (
	"encoding/json"
	"errors"
	"strings"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/policy"
	"weft.dev/weft/tool/mcp"
)

// The checks of a request that need the host: what its params can check
// on their own is their Validate (package api), which every method runs
// first (mutate does for the mutating ones); what follows needs the
// host's configuration (its models, policy, MCP client) or its file
// system (protect.go, prepareMounts). Each method calls these in one
// place, before it changes anything.

// invalid is api.InvalidParam: an invalid_params error naming field.
func invalid(field string, format string, args ...any) *api.Error {
	return api.InvalidParam(field, format, args...)
}

// checkModel refuses a model the host cannot use; "" (the default)
// passes. An *api.Error of ResolveModel keeps its kind and data (such as
// env, the variable a missing API key is read from) and gains field.
func (h *Host) checkModel(field, name string) error {
	if name == "" {
		return nil
	}
	_, err := h.cfg.ResolveModel(name)
	if err == nil {
		return nil
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		e := ae.With("field", field)
		e.Message = field + ": " + ae.Message
		return e
	}
	return api.Wrap(api.KindInvalidParams, err, "%s: %v", field, err).With("field", field)
}

// checkImplicitModel refuses a run that names no model when the model it
// would use, the session's (sessionModel) or else the host's default, is
// one the host cannot use, so that the client hears why (a missing API
// key with its variable in data.env) instead of a run that fails at its
// start. The error names the field "model", which the client can set.
func (h *Host) checkImplicitModel(sessionModel string) error {
	name, whose := sessionModel, "the session's model"
	if name == "" {
		name, whose = h.cfg.DefaultModel, "the host's default model"
	}
	_, err := h.cfg.ResolveModel(name)
	if err == nil {
		return nil
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.With("field", "model")
	}
	return api.Wrap(api.KindInvalidParams, err, "%s %q: %v", whose, name, err).With("field", "model")
}

// checkPolicy compiles a policy layer over the host's, and returns it
// encoded; nil passes.
func (h *Host) checkPolicy(field string, p *api.Policy) (json.RawMessage, error) {
	if p == nil {
		return nil, nil
	}
	if _, err := policy.Compile(h.cfg.Policy, *p); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			if f, ok := ae.Data["field"].(string); ok {
				ae = ae.With("field", field+"."+f)
				ae.Message = field + "." + ae.Message
			}
			return nil, ae
		}
		return nil, invalid(field, "%s: %v", field, err)
	}
	return json.Marshal(p)
}

// checkPreset refuses a preset policy does not know; "" passes.
func checkPreset(field, name string) error {
	if _, ok := policy.PresetRules(name); name != "" && !ok {
		return invalid(field, "%s %q: unknown preset; one of %s", field, clip(name, 64), strings.Join(policy.Presets(), ", "))
	}
	return nil
}

// checkMCPServers checks a session's MCP servers against the host: it
// must have an MCP client, and each server must pass
// mcp.Manager.CheckSession. (Their number and size are the params'
// Validate.)
func (h *Host) checkMCPServers(servers map[string]event.MCPServer) error {
	if len(servers) == 0 {
		return nil
	}
	if h.cfg.MCP == nil {
		return invalid("mcpServers", "this host has no MCP client")
	}
	if err := h.cfg.MCP.CheckSession(servers); err != nil {
		var fe *mcp.FieldError
		if errors.As(err, &fe) {
			field := "mcpServers." + fe.Server
			if fe.Field != "" {
				field += "." + fe.Field
			}
			return invalid(field, "%s", err)
		}
		return invalid("mcpServers", "%s", err)
	}
	return nil
}
