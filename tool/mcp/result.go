package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"weft.dev/weft/event"
	"weft.dev/weft/tool"
)

// result maps a tool's result to what the model sees: text content as
// is, one block per line; structured content as JSON after the text
// (unless a text block already says the same); images (image content, and
// embedded blobs of an image type) as attachments the model sees after
// the text, with a line where each was ("[image 1 attached: image/png,
// 5120 bytes]"); audio, other blobs and images of a type weft does not
// send as a placeholder naming their type and size; resource links and
// embedded text resources with their URI; isError as an error result.
// [tool.Registry.Call] then keeps the attachments within weft's image
// limits, saying which it left out.
func result(r *sdk.CallToolResult) tool.Result {
	var atts []event.Part
	attach := func(mime string, data []byte) bool {
		if !slices.Contains(event.ImageMediaTypes(), mime) {
			return false
		}
		atts = append(atts, event.Part{Type: event.PartImage, MediaType: mime, Data: data})
		return true
	}
	var b strings.Builder
	sep := func() {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
	}
	for _, c := range r.Content {
		sep()
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			if attach(c.MIMEType, c.Data) {
				fmt.Fprintf(&b, "[image %d attached: %s, %d bytes]", len(atts), c.MIMEType, len(c.Data))
				break
			}
			fmt.Fprintf(&b, "[image: %s, %d bytes, not shown: weft sends only %s images to the model]",
				orUnknown(c.MIMEType), len(c.Data), strings.Join(event.ImageMediaTypes(), ", "))
		case *sdk.AudioContent:
			fmt.Fprintf(&b, "[audio: %s, %d bytes, not played: weft passes only text to the model]", orUnknown(c.MIMEType), len(c.Data))
		case *sdk.ResourceLink:
			fmt.Fprintf(&b, "[resource link: %s", c.URI)
			if c.Name != "" {
				fmt.Fprintf(&b, " %q", c.Name)
			}
			if c.MIMEType != "" {
				fmt.Fprintf(&b, " (%s)", c.MIMEType)
			}
			if c.Description != "" {
				fmt.Fprintf(&b, ": %s", c.Description)
			}
			b.WriteByte(']')
		case *sdk.EmbeddedResource:
			res := c.Resource
			switch {
			case res == nil:
				b.WriteString("[an empty embedded resource]")
			case res.Blob != nil && attach(res.MIMEType, res.Blob):
				fmt.Fprintf(&b, "[resource %s: image %d attached: %s, %d bytes]", res.URI, len(atts), res.MIMEType, len(res.Blob))
			case res.Blob != nil:
				fmt.Fprintf(&b, "[resource %s: %s, %d bytes of binary data, not shown]", res.URI, orUnknown(res.MIMEType), len(res.Blob))
			default:
				fmt.Fprintf(&b, "[resource %s]\n%s", res.URI, res.Text)
			}
		default:
			fmt.Fprintf(&b, "[content of type %T, not shown]", c)
		}
	}
	if r.StructuredContent != nil && !saidInText(r.Content, r.StructuredContent) {
		if js, err := json.Marshal(r.StructuredContent); err == nil {
			sep()
			b.WriteString("structured content: ")
			b.Write(js)
		}
	}
	out := b.String()
	if out == "" {
		if r.IsError {
			out = "the tool failed without saying why"
		} else {
			out = "(no output)"
		}
	}
	return tool.Result{Output: out, IsError: r.IsError, Attachments: atts}
}

func orUnknown(mime string) string {
	if mime == "" {
		return "type unknown"
	}
	return mime
}

// saidInText reports whether the text blocks already say the structured
// content: one holds it as JSON (as servers are asked to send it for
// older clients), or every value in it (up to maxLeaves) appears in the
// text.
func saidInText(content []sdk.Content, structured any) bool {
	want, err := json.Marshal(structured)
	if err != nil {
		return false
	}
	var w any
	if json.Unmarshal(want, &w) != nil {
		return false
	}
	var text strings.Builder
	for _, c := range content {
		t, ok := c.(*sdk.TextContent)
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal([]byte(t.Text), &v) == nil && reflect.DeepEqual(v, w) {
			return true
		}
		text.WriteString(t.Text)
	}
	if text.Len() == 0 {
		return false
	}
	all := text.String()
	n := 0
	var found func(v any) bool
	found = func(v any) bool {
		if n++; n > maxLeaves {
			return false
		}
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				if !found(x) {
					return false
				}
			}
			return true
		case []any:
			for _, x := range v {
				if !found(x) {
					return false
				}
			}
			return true
		case string:
			return strings.Contains(all, v)
		case nil:
			return true
		default:
			b, _ := json.Marshal(v)
			return strings.Contains(all, string(b))
		}
	}
	return found(w)
}

// maxLeaves bounds the values saidInText looks for.
const maxLeaves = 1000
