package api

import (
	"weft.dev/weft/event"
)

// The MCP methods reach the resources and prompts of the MCP servers a
// session's runs use: the host's configured servers and, with a
// sessionId, the session's own (which replace the host's of the same
// name). A server is started on first use, as for a run's step.
const (
	MethodMCPResources    = "mcp/resources"
	MethodMCPReadResource = "mcp/read_resource"
	MethodMCPPrompts      = "mcp/prompts"
	MethodMCPGetPrompt    = "mcp/get_prompt"
)

// The descriptors of the MCP methods (see [Methods]).
var (
	MCPResources = Method[MCPListParams, MCPResourcesResult]{Name: MethodMCPResources,
		Doc: "List the resources of the MCP servers (the host's, and a session's own).", call: Host.MCPResources}
	MCPReadResource = Method[MCPReadResourceParams, MCPReadResourceResult]{Name: MethodMCPReadResource,
		Doc: "Read a resource of an MCP server.", call: Host.MCPReadResource}
	MCPPrompts = Method[MCPListParams, MCPPromptsResult]{Name: MethodMCPPrompts,
		Doc: "List the prompts of the MCP servers (the host's, and a session's own).", call: Host.MCPPrompts}
	MCPGetPrompt = Method[MCPGetPromptParams, MCPGetPromptResult]{Name: MethodMCPGetPrompt,
		Doc: "Get a prompt of an MCP server with its arguments filled in.", call: Host.MCPGetPrompt}
)

// MaxMCPListItems caps the resources or prompts one server lists to
// mcp/resources or mcp/prompts; beyond it the list is cut (Truncated).
const MaxMCPListItems = 1000

// MCPListParams are the params of mcp/resources and mcp/prompts.
type MCPListParams struct {
	// SessionID, if set, adds the session's own servers.
	SessionID string `json:"sessionId,omitempty"`
	// Server, if set, lists only that server's.
	Server string `json:"server,omitempty"`
}

// Validate checks the IDs' sizes.
func (p MCPListParams) Validate() error {
	return firstError(checkID("sessionId", p.SessionID), checkID("server", p.Server))
}

// MCPServerFailure is a server a list could not ask, and why.
type MCPServerFailure struct {
	Server string `json:"server"`
	Error  string `json:"error"`
}

// MCPResource is a resource an MCP server offers.
type MCPResource struct {
	Server      string `json:"server"`
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Size        int64  `json:"size,omitempty"`
}

// MCPResourcesResult is the result of mcp/resources.
type MCPResourcesResult struct {
	Resources []MCPResource `json:"resources"`
	// Failed are the servers that could not be asked.
	Failed []MCPServerFailure `json:"failed,omitempty"`
	// Truncated names the servers whose list was cut at MaxMCPListItems.
	Truncated []string `json:"truncated,omitempty"`
}

// MCPReadResourceParams are the params of mcp/read_resource.
type MCPReadResourceParams struct {
	SessionID string `json:"sessionId,omitempty"`
	Server    string `json:"server"`
	URI       string `json:"uri"`
}

// Validate checks that server and uri are given and bounded.
func (p MCPReadResourceParams) Validate() error {
	return firstError(checkID("sessionId", p.SessionID), required("server", p.Server),
		func() error {
			if p.URI == "" {
				return InvalidParam("uri", "uri is required")
			}
			return checkSize("uri", len(p.URI), MaxURIBytes)
		}())
}

// MaxURIBytes caps a resource URI.
const MaxURIBytes = 4 << 10

// MCPResourceContents is one part of a read resource: text, or a blob
// (base64 on the wire).
type MCPResourceContents struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     []byte `json:"blob,omitempty"`
}

// MCPReadResourceResult is the result of mcp/read_resource.
type MCPReadResourceResult struct {
	Contents []MCPResourceContents `json:"contents"`
}

// MCPPromptArgument is an argument a prompt takes.
type MCPPromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// MCPPrompt is a prompt an MCP server offers.
type MCPPrompt struct {
	Server      string              `json:"server"`
	Name        string              `json:"name"`
	Title       string              `json:"title,omitempty"`
	Description string              `json:"description,omitempty"`
	Arguments   []MCPPromptArgument `json:"arguments,omitempty"`
}

// MCPPromptsResult is the result of mcp/prompts.
type MCPPromptsResult struct {
	Prompts   []MCPPrompt        `json:"prompts"`
	Failed    []MCPServerFailure `json:"failed,omitempty"`
	Truncated []string           `json:"truncated,omitempty"`
}

// MCPGetPromptParams are the params of mcp/get_prompt.
type MCPGetPromptParams struct {
	SessionID string            `json:"sessionId,omitempty"`
	Server    string            `json:"server"`
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
}

// Validate checks that server and name are given and the arguments
// bounded (MaxMetadataKeys entries, MaxInputBytes in all).
func (p MCPGetPromptParams) Validate() error {
	n := 0
	for k, v := range p.Arguments {
		n += len(k) + len(v)
	}
	if len(p.Arguments) > MaxMetadataKeys {
		return InvalidParam("arguments", "%d arguments; the limit is %d", len(p.Arguments), MaxMetadataKeys).With("limit", MaxMetadataKeys)
	}
	return firstError(checkID("sessionId", p.SessionID), required("server", p.Server), required("name", p.Name),
		checkSize("arguments", n, MaxInputBytes))
}

// MCPPromptMessage is one message of a prompt: its role ("user" or
// "assistant") and content parts (text, images; an embedded text
// resource is text).
type MCPPromptMessage struct {
	Role    string       `json:"role"`
	Content []event.Part `json:"content"`
}

// MCPGetPromptResult is the result of mcp/get_prompt: what a client may
// send as a run's input (the user messages' parts).
type MCPGetPromptResult struct {
	Description string             `json:"description,omitempty"`
	Messages    []MCPPromptMessage `json:"messages"`
}
