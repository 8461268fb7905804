package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// ErrNoServer reports a server name that neither the host's
// configuration nor the session has.
var ErrNoServer = errors.New("mcp: no such server")

// The resources and prompts of servers: what mcp/resources,
// mcp/read_resource, mcp/prompts and mcp/get_prompt answer, and `weft mcp
// resources|prompts`. Each starts the server if it is not running, as a
// step would, in binding b (the session's mounts; nil: none).

// lookup returns the launch of the server name: the session's, else the
// host's.
func (m *Manager) lookup(name string, session map[string]event.MCPServer, b *env.Binding) (*launch, error) {
	if spec, ok := session[name]; ok {
		return m.launchFor(name, spec, FromSession, b)
	}
	if spec, ok := m.cfg.Servers[name]; ok {
		return m.launchFor(name, spec, FromConfig, b)
	}
	all := sortedKeys(m.cfg.Servers)
	for n := range session {
		if !slices.Contains(all, n) {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	return nil, fmt.Errorf("%w %q (servers: %v)", ErrNoServer, name, all)
}

// serversToAsk returns the servers to ask: only, or every
// server of the host and the session.
func (m *Manager) serversToAsk(only string, session map[string]event.MCPServer) []string {
	if only != "" {
		return []string{only}
	}
	all := sortedKeys(m.cfg.Servers)
	for n := range session {
		if !slices.Contains(all, n) {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	return all
}

// withServer runs f on a live connection of the server name.
func (m *Manager) withServer(ctx context.Context, name string, session map[string]event.MCPServer, b *env.Binding, f func(*sdk.ClientSession) error) error {
	l, err := m.lookup(name, session, b)
	if err != nil {
		return err
	}
	c, done, err := m.conn(ctx, l)
	if err != nil {
		return err
	}
	defer done()
	if err := f(c.cs); err != nil {
		return fmt.Errorf("%s: %w", l.what(), err)
	}
	return nil
}

// Resources lists the resources of the server only, or of every server
// (the host's and session's): those that fail are in Failed, a list cut
// at api.MaxMCPListItems in Truncated. Only an unknown server is an
// error (wrapping ErrNoServer).
func (m *Manager) Resources(ctx context.Context, only string, session map[string]event.MCPServer, b *env.Binding) (*api.MCPResourcesResult, error) {
	out := &api.MCPResourcesResult{Resources: []api.MCPResource{}}
	for _, name := range m.serversToAsk(only, session) {
		n := 0
		err := m.withServer(ctx, name, session, b, func(cs *sdk.ClientSession) error {
			if cs.InitializeResult().Capabilities.Resources == nil {
				return nil
			}
			for r, err := range cs.Resources(ctx, nil) {
				if err != nil {
					return err
				}
				if n++; n > api.MaxMCPListItems {
					out.Truncated = append(out.Truncated, name)
					return nil
				}
				out.Resources = append(out.Resources, api.MCPResource{Server: name, URI: r.URI, Name: r.Name, Title: r.Title,
					Description: r.Description, MIMEType: r.MIMEType, Size: r.Size})
			}
			return nil
		})
		if errors.Is(err, ErrNoServer) || ctx.Err() != nil {
			return nil, err
		}
		if err != nil {
			out.Failed = append(out.Failed, api.MCPServerFailure{Server: name, Error: err.Error()})
		}
	}
	return out, nil
}

// ReadResource reads the resource uri of server.
func (m *Manager) ReadResource(ctx context.Context, server, uri string, session map[string]event.MCPServer, b *env.Binding) (*api.MCPReadResourceResult, error) {
	out := &api.MCPReadResourceResult{Contents: []api.MCPResourceContents{}}
	err := m.withServer(ctx, server, session, b, func(cs *sdk.ClientSession) error {
		res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			return fmt.Errorf("reading %s: %w", uri, err)
		}
		for _, c := range res.Contents {
			if c == nil {
				continue
			}
			out.Contents = append(out.Contents, api.MCPResourceContents{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text, Blob: c.Blob})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Prompts lists the prompts of the server only, or of every server, as
// Resources does.
func (m *Manager) Prompts(ctx context.Context, only string, session map[string]event.MCPServer, b *env.Binding) (*api.MCPPromptsResult, error) {
	out := &api.MCPPromptsResult{Prompts: []api.MCPPrompt{}}
	for _, name := range m.serversToAsk(only, session) {
		n := 0
		err := m.withServer(ctx, name, session, b, func(cs *sdk.ClientSession) error {
			if cs.InitializeResult().Capabilities.Prompts == nil {
				return nil
			}
			for p, err := range cs.Prompts(ctx, nil) {
				if err != nil {
					return err
				}
				if n++; n > api.MaxMCPListItems {
					out.Truncated = append(out.Truncated, name)
					return nil
				}
				pr := api.MCPPrompt{Server: name, Name: p.Name, Title: p.Title, Description: p.Description}
				for _, a := range p.Arguments {
					if a != nil {
						pr.Arguments = append(pr.Arguments, api.MCPPromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
					}
				}
				out.Prompts = append(out.Prompts, pr)
			}
			return nil
		})
		if errors.Is(err, ErrNoServer) || ctx.Err() != nil {
			return nil, err
		}
		if err != nil {
			out.Failed = append(out.Failed, api.MCPServerFailure{Server: name, Error: err.Error()})
		}
	}
	return out, nil
}

// GetPrompt gets the prompt name of server with args. Its messages'
// content become parts: text as is, images of the types weft sends as
// image parts, embedded text resources as text naming their URI, other
// content as a placeholder text (the same mapping as a tool's result).
func (m *Manager) GetPrompt(ctx context.Context, server, name string, args map[string]string, session map[string]event.MCPServer, b *env.Binding) (*api.MCPGetPromptResult, error) {
	out := &api.MCPGetPromptResult{Messages: []api.MCPPromptMessage{}}
	err := m.withServer(ctx, server, session, b, func(cs *sdk.ClientSession) error {
		res, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			return fmt.Errorf("prompt %s: %w", name, err)
		}
		out.Description = res.Description
		for _, msg := range res.Messages {
			if msg == nil {
				continue
			}
			r := result(&sdk.CallToolResult{Content: []sdk.Content{msg.Content}})
			var parts []event.Part
			if _, isText := msg.Content.(*sdk.TextContent); !isText || r.Output != "" {
				parts = append(parts, event.TextParts(r.Output)...)
			}
			if _, isImage := msg.Content.(*sdk.ImageContent); isImage && len(r.Attachments) > 0 {
				parts = r.Attachments // the image alone, without the line that names it
			}
			out.Messages = append(out.Messages, api.MCPPromptMessage{Role: string(msg.Role), Content: parts})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
