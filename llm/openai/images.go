package openai

import (
	"encoding/base64"
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"weft.dev/weft/llm"
)

// Images in OpenAI's two dialects. Each function builds one wire shape
// from an [llm.Attachment], so that an encoder without the SDK can carry
// them over; the tests check the request bodies they make.

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

// chatUserMessage is a Chat Completions user message with images: its
// content a list of a text part (if any) and image_url parts holding
// data URLs.
func chatUserMessage(text string, atts []llm.Attachment) sdk.ChatCompletionMessageParamUnion {
	parts := make([]sdk.ChatCompletionContentPartUnionParam, 0, 1+len(atts))
	if text != "" {
		parts = append(parts, sdk.TextContentPart(text))
	}
	for _, a := range atts {
		parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: dataURL(a)}))
	}
	return sdk.UserMessage(parts)
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

// responsesUserMessage is a Responses user message with images: its
// content a list of an input_text (if any) and input_image items holding
// data URLs.
func responsesUserMessage(text string, atts []llm.Attachment) responses.ResponseInputItemUnionParam {
	content := make(responses.ResponseInputMessageContentListParam, 0, 1+len(atts))
	if text != "" {
		content = append(content, responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: text}})
	}
	for _, a := range atts {
		content = append(content, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
			ImageURL: param.NewOpt(dataURL(a)), Detail: responses.ResponseInputImageDetailAuto,
		}})
	}
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
		Role:    responses.EasyInputMessageRoleUser,
		Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: content},
	}}
}

// responsesToolOutput is a function_call_output's output with images: a
// list of an input_text and input_image items.
func responsesToolOutput(text string, atts []llm.Attachment) responses.ResponseInputItemFunctionCallOutputOutputUnionParam {
	items := make(responses.ResponseFunctionCallOutputItemListParam, 0, 1+len(atts))
	if text != "" {
		items = append(items, responses.ResponseFunctionCallOutputItemUnionParam{OfInputText: &responses.ResponseInputTextContentParam{Text: text}})
	}
	for _, a := range atts {
		items = append(items, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{
			ImageURL: param.NewOpt(dataURL(a)), Detail: responses.ResponseInputImageContentDetailAuto,
		}})
	}
	return responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfResponseFunctionCallOutputItemArray: items}
}
