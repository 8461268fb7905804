package api

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"weft.dev/weft/event"
)

// InvalidParam returns an error of kind [KindInvalidParams] whose data
// names the param at fault ({"field": field}); a Validate method, or a
// host checking what needs its state, reports a bad param with it.
// Nested fields are dotted and indexed: "mounts[1].path".
func InvalidParam(field, format string, args ...any) *Error {
	return Errorf(KindInvalidParams, format, args...).With("field", field)
}

// firstError returns the first non-nil error of errs: the checks of a
// Validate method, in the order a client reads about them.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkSize refuses a field longer than limit bytes.
func checkSize(field string, n, limit int) error {
	if n > limit {
		return InvalidParam(field, "%s is %d bytes; the limit is %d", field, n, limit).With("limit", limit)
	}
	return nil
}

// required refuses an empty field, and one over [MaxIDBytes] (the
// fields it is used for are IDs and names).
func required(field, v string) error {
	if v == "" {
		return InvalidParam(field, "%s is required", field)
	}
	return checkID(field, v)
}

// checkID refuses an ID over [MaxIDBytes]; "" passes. A Validate checks
// its IDs before its other fields. (An ID is echoed in the host's
// not_found errors and logs: a bounded one keeps them bounded.)
func checkID(field, id string) error {
	return checkSize(field, len(id), MaxIDBytes)
}

// nonNegative refuses a negative number.
func nonNegative(field string, n int64) error {
	if n < 0 {
		return InvalidParam(field, "%s must not be negative", field)
	}
	return nil
}

// checkKey refuses an idempotency key over [MaxIDBytes].
func checkKey(key string) error {
	if len(key) > MaxIDBytes {
		return InvalidParam("idempotencyKey", "idempotencyKey is longer than %d bytes", MaxIDBytes).With("limit", MaxIDBytes)
	}
	return nil
}

// checkInput refuses input that is empty (no text and no image), of an
// unknown part type, over MaxInputBytes without its images' bytes, or
// with an image [event.CheckImages] refuses: of a type other than
// [event.ImageMediaTypes] (error data: field, mediaTypes), over
// [event.MaxImageBytes] or, all together, over [event.MaxImagesBytes] or
// [event.MaxImages] (field, limit), or that does not decode (field).
func checkInput(in Input) error {
	images := 0
	text := make(Input, 0, len(in))
	for i, p := range in {
		f := "input[" + strconv.Itoa(i) + "]"
		switch p.Type {
		case event.PartText:
			if p.MediaType != "" || len(p.Data) > 0 {
				return InvalidParam(f, "%s: a text part has no mediaType or data", f)
			}
			text = append(text, p)
		case event.PartImage:
			if p.Text != "" {
				return InvalidParam(f, "%s: an image part has no text", f)
			}
			images++
			text = append(text, event.Part{Type: p.Type, MediaType: p.MediaType})
		default:
			return InvalidParam(f, "%s: unknown part type %q: want text or image", f, p.Type)
		}
	}
	if images == 0 && strings.TrimSpace(event.Text(in)) == "" {
		return InvalidParam("input", "input is empty")
	}
	b, _ := json.Marshal(text)
	if err := checkSize("input", len(b), MaxInputBytes); err != nil {
		return err
	}
	if images == 0 {
		return nil
	}
	i, err := event.CheckImages(in)
	if err == nil {
		return nil
	}
	f := "input"
	if i >= 0 {
		f = "input[" + strconv.Itoa(i) + "]"
	}
	e := InvalidParam(f, "%s: %v", f, err)
	switch {
	case errors.Is(err, event.ErrImageType):
		e = e.With("mediaTypes", event.ImageMediaTypes())
	case errors.Is(err, event.ErrImageTooLarge) && i >= 0:
		e = e.With("limit", event.MaxImageBytes)
	case errors.Is(err, event.ErrImageTooLarge):
		e = e.With("limit", event.MaxImagesBytes).With("maxImages", event.MaxImages)
	}
	return e
}

// checkMetadata refuses metadata over [MaxMetadataKeys] or
// [MaxMetadataBytes].
func checkMetadata(md map[string]string) error {
	if len(md) > MaxMetadataKeys {
		return InvalidParam("metadata", "metadata has %d entries; the limit is %d", len(md), MaxMetadataKeys).With("limit", MaxMetadataKeys)
	}
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	return checkSize("metadata", n, MaxMetadataBytes)
}

// checkMCPServers refuses more than [MaxMCPServers] servers, or more than
// [MaxMCPServersBytes] of them.
func checkMCPServers(servers map[string]event.MCPServer) error {
	if len(servers) == 0 {
		return nil
	}
	if len(servers) > MaxMCPServers {
		return InvalidParam("mcpServers", "%d MCP servers; the limit is %d", len(servers), MaxMCPServers).With("limit", MaxMCPServers)
	}
	b, err := json.Marshal(servers)
	if err != nil {
		return InvalidParam("mcpServers", "mcpServers: %v", err)
	}
	return checkSize("mcpServers", len(b), MaxMCPServersBytes)
}

// toolNameRE is what providers accept as a tool name.
// toolNameRE is compiled on first use, not at start: most commands never need it.
var toolNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// checkTools validates the tools a client declares: at most
// MaxClientTools of at most MaxClientToolsBytes together, names providers
// accept, each once and none the host's own ask_user, an object input
// schema, a description of at most MaxMetadataBytes.
func checkTools(field string, ts []ToolSpec) error {
	if len(ts) > MaxClientTools {
		return InvalidParam(field, "%d tools; the limit is %d", len(ts), MaxClientTools).With("limit", MaxClientTools)
	}
	n := 0
	for _, t := range ts {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	if n > MaxClientToolsBytes {
		return InvalidParam(field, "the tools take %d bytes; the limit is %d", n, MaxClientToolsBytes).With("limit", MaxClientToolsBytes)
	}
	seen := map[string]bool{}
	for i, t := range ts {
		f := field + "[" + strconv.Itoa(i) + "]"
		if !toolNameRE().MatchString(t.Name) {
			return InvalidParam(f+".name", "%s.name %q: 1 to 64 of a-z A-Z 0-9 _ -", f, clip(t.Name, 64))
		}
		if t.Name == ToolAskUser || seen[t.Name] {
			return InvalidParam(f+".name", "%s.name %q is taken", f, t.Name)
		}
		seen[t.Name] = true
		var schema map[string]any
		if len(t.InputSchema) == 0 || json.Unmarshal(t.InputSchema, &schema) != nil || schema["type"] != "object" {
			return InvalidParam(f+".inputSchema", `%s.inputSchema: want a JSON Schema object ({"type":"object",…})`, f)
		}
		if err := checkSize(f+".description", len(t.Description), MaxMetadataBytes); err != nil {
			return err
		}
	}
	return nil
}

// checkMountID refuses a mount ID that is not a slug of at most
// [MaxIDBytes]: [a-z0-9][a-z0-9_-]*, the rule of a binding's mounts. A
// scratch mount's directory is named after its ID, so the ID is checked
// before the host makes anything.
func checkMountID(field, id string) error {
	if id == "" {
		return InvalidParam(field, "%s is required", field)
	}
	if err := checkSize(field, len(id), MaxIDBytes); err != nil {
		return err
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return InvalidParam(field, "%s %q is not a slug [a-z0-9][a-z0-9_-]*", field, clip(id, 64))
		}
	}
	return nil
}

// checkMounts checks the number of a session's mounts (at most
// [MaxMounts]) and their IDs.
func checkMounts(field string, ms []event.Mount) error {
	if len(ms) > MaxMounts {
		return InvalidParam(field, "%d mounts; the limit is %d", len(ms), MaxMounts).With("limit", MaxMounts)
	}
	for i, m := range ms {
		if err := checkMountID(field+"["+strconv.Itoa(i)+"].id", m.ID); err != nil {
			return err
		}
	}
	return nil
}

// clip shortens s to n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// oneOf refuses a value that is none of want; format has one %q, for v
// clipped to 64 bytes (the error echoes it).
func oneOf(field, v, format string, want ...string) error {
	for _, w := range want {
		if v == w {
			return nil
		}
	}
	return InvalidParam(field, format, clip(v, 64))
}
