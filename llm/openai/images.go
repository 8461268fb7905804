package openai

import (
	"encoding/base64"
	"fmt"
	"strings"

	"weft.dev/weft/internal/jsonstr"
	"weft.dev/weft/llm"
)

// Images in OpenAI's two dialects; the tests check the request bodies
// they make.

// dataURL is an attachment as a data URL, the form both dialects accept
// for an image sent inline.
func dataURL(a llm.Attachment) string {
	var b strings.Builder
	b.Grow(len("data:;base64,") + len(a.MediaType) + base64.StdEncoding.EncodedLen(len(a.Data)))
	b.WriteString("data:")
	b.WriteString(a.MediaType)
	b.WriteString(";base64,")
	w := base64.NewEncoder(base64.StdEncoding, &b)
	_, _ = w.Write(a.Data)
	_ = w.Close()
	return b.String()
}

// checkAttachments refuses an attachment that is not an image.
func checkAttachments(i int, m llm.Message) error {
	for _, a := range m.Attachments {
		if !strings.HasPrefix(a.MediaType, "image/") {
			return fmt.Errorf("message %d: attachment of type %q: only images are sent", i, a.MediaType)
		}
	}
	return nil
}

// chatMessages returns msgs as Chat Completions can carry them: a tool
// message holds text only, so the images of tool results move to a user
// message after the run of tool messages they came in (the tool messages
// of one assistant message must follow it together), which names the
// calls they belong to. msgs is returned as is when no tool result has
// images.
func chatMessages(msgs []llm.Message) []llm.Message {
	moved := false
	for _, m := range msgs {
		if m.Role == llm.RoleTool && len(m.Attachments) > 0 {
			moved = true
			break
		}
	}
	if !moved {
		return msgs
	}
	out := make([]llm.Message, 0, len(msgs)+1)
	var pending llm.Message // the user message of the current run's images
	flush := func() {
		if len(pending.Attachments) > 0 {
			out = append(out, pending)
		}
		pending = llm.Message{}
	}
	for _, m := range msgs {
		if m.Role != llm.RoleTool {
			flush()
			out = append(out, m)
			continue
		}
		if len(m.Attachments) > 0 {
			if pending.Content == "" {
				pending = llm.Message{Role: llm.RoleUser, Content: "Images returned by tool calls:"}
			}
			pending.Content += fmt.Sprintf(" %d from %s (%s);", len(m.Attachments), m.ToolCallID, m.ToolName)
			pending.Attachments = append(pending.Attachments, m.Attachments...)
			m.Attachments = nil
		}
		out = append(out, m)
	}
	flush()
	return out
}

// appendInputParts appends the Responses content of a user message or a
// tool result with images, without its brackets: an input_text (if text
// is not empty) and an input_image holding a data URL per image.
func appendInputParts(b []byte, text string, atts []llm.Attachment) []byte {
	if text != "" {
		b = append(b, `{"text":`...)
		b = jsonstr.Append(b, text)
		b = append(b, `,"type":"input_text"}`...)
	}
	for i, a := range atts {
		if i > 0 || text != "" {
			b = append(b, ',')
		}
		b = append(b, `{"detail":"auto","image_url":`...)
		b = jsonstr.Append(b, dataURL(a))
		b = append(b, `,"type":"input_image"}`...)
	}
	return b
}
