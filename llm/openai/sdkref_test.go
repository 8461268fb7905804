// The request encoding of the SDK (github.com/openai/openai-go/v3), kept
// as the reference the tests compare weft's own encoding with.

package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

func (p *Chat) params(req *llm.Request) (sdk.ChatCompletionNewParams, error) {
	var out sdk.ChatCompletionNewParams
	if req == nil {
		return out, errors.New("nil request")
	}
	cfg := &p.c.cfg
	out.Model = req.Model
	out.StreamOptions.IncludeUsage = param.NewOpt(true)
	if req.MaxTokens > 0 {
		if cfg.MaxTokensField == "max_completion_tokens" {
			out.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			out.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if req.Temperature != nil {
		out.Temperature = param.NewOpt(*req.Temperature)
	}
	if cfg.ReasoningEffort != "" {
		out.ReasoningEffort = shared.ReasoningEffort(cfg.ReasoningEffort)
	}
	if req.System != "" {
		out.Messages = append(out.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range chatMessages(req.Messages) {
		if err := checkAttachments(i, m); err != nil {
			return out, err
		}
		switch m.Role {
		case llm.RoleUser:
			if len(m.Attachments) > 0 {
				out.Messages = append(out.Messages, sdkChatUserMessage(m.Content, m.Attachments))
				break
			}
			out.Messages = append(out.Messages, sdk.UserMessage(m.Content))
		case llm.RoleAssistant:
			var a sdk.ChatCompletionAssistantMessageParam
			if m.Content != "" {
				a.Content.OfString = param.NewOpt(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name: tc.Name, Arguments: tc.Arguments,
						},
					},
				})
			}
			if cfg.ReasoningReplayField != "" && m.Reasoning != "" {
				a.SetExtraFields(map[string]any{cfg.ReasoningReplayField: m.Reasoning})
			}
			if m.Content == "" && len(m.ToolCalls) == 0 {
				// Some servers reject an assistant message with neither.
				a.Content.OfString = param.NewOpt("")
			}
			out.Messages = append(out.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return out, fmt.Errorf("message %d: tool result without ToolCallID", i)
			}
			out.Messages = append(out.Messages, sdk.ToolMessage(m.Content, m.ToolCallID))
		default:
			return out, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		params, err := sdkToolParameters(t.Name, t.InputSchema)
		if err != nil {
			return out, err
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		out.Tools = append(out.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	return out, nil
}

func (p *Responses) params(req *llm.Request) (responses.ResponseNewParams, error) {
	var out responses.ResponseNewParams
	if req == nil {
		return out, errors.New("nil request")
	}
	cfg := &p.c.cfg
	out.Model = req.Model
	out.Store = param.NewOpt(false)
	if req.System != "" {
		out.Instructions = param.NewOpt(req.System)
	}
	if req.MaxTokens > 0 {
		out.MaxOutputTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		out.Temperature = param.NewOpt(*req.Temperature)
	}
	if cfg.ReasoningEffort != "" {
		out.Reasoning.Effort = shared.ReasoningEffort(cfg.ReasoningEffort)
		switch cfg.ReasoningSummary {
		case "":
			out.Reasoning.Summary = shared.ReasoningSummaryAuto
		case "none":
		default:
			out.Reasoning.Summary = shared.ReasoningSummary(cfg.ReasoningSummary)
		}
		out.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	items := make(responses.ResponseInputParam, 0, len(req.Messages))
	for i, m := range req.Messages {
		if err := checkAttachments(i, m); err != nil {
			return out, err
		}
		switch m.Role {
		case llm.RoleUser:
			if len(m.Attachments) > 0 {
				items = append(items, sdkResponsesUserMessage(m.Content, m.Attachments))
				break
			}
			items = append(items, sdkMessage(responses.EasyInputMessageRoleUser, m.Content))
		case llm.RoleAssistant:
			var st providerState
			if len(m.ProviderState) > 0 && json.Unmarshal(m.ProviderState, &st) == nil {
				for _, r := range st.Reasoning {
					items = append(items, responses.ResponseInputItemUnionParam{
						OfReasoning: new(param.Override[responses.ResponseReasoningItemParam](r)),
					})
				}
			}
			if m.Content != "" {
				items = append(items, sdkMessage(responses.EasyInputMessageRoleAssistant, m.Content))
			}
			for _, tc := range m.ToolCalls {
				items = append(items, responses.ResponseInputItemUnionParam{
					OfFunctionCall: &responses.ResponseFunctionToolCallParam{
						CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
					},
				})
			}
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return out, fmt.Errorf("message %d: tool result without ToolCallID", i)
			}
			output := responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(m.Content)}
			if len(m.Attachments) > 0 {
				output = sdkResponsesToolOutput(m.Content, m.Attachments)
			}
			items = append(items, responses.ResponseInputItemUnionParam{
				OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: param.NewOpt(m.ToolCallID),
					Output: output,
				},
			})
		default:
			return out, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	out.Input.OfInputItemList = items
	for _, t := range req.Tools {
		params, err := sdkToolParameters(t.Name, t.InputSchema)
		if err != nil {
			return out, err
		}
		fn := &responses.FunctionToolParam{Name: t.Name, Parameters: params, Strict: param.NewOpt(false)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		out.Tools = append(out.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	return out, nil
}

func sdkMessage(role responses.EasyInputMessageRole, text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
		Role:    role,
		Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(text)},
	}}
}

// chatUserMessage is a Chat Completions user message with images: its
// content a list of a text part (if any) and image_url parts holding
// data URLs.
func sdkChatUserMessage(text string, atts []llm.Attachment) sdk.ChatCompletionMessageParamUnion {
	parts := make([]sdk.ChatCompletionContentPartUnionParam, 0, 1+len(atts))
	if text != "" {
		parts = append(parts, sdk.TextContentPart(text))
	}
	for _, a := range atts {
		parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: dataURL(a)}))
	}
	return sdk.UserMessage(parts)
}

// responsesUserMessage is a Responses user message with images: its
// content a list of an input_text (if any) and input_image items holding
// data URLs.
func sdkResponsesUserMessage(text string, atts []llm.Attachment) responses.ResponseInputItemUnionParam {
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
func sdkResponsesToolOutput(text string, atts []llm.Attachment) responses.ResponseInputItemFunctionCallOutputOutputUnionParam {
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

// toolParameters turns a tool's JSON Schema into the SDK's map form without
// re-encoding its values (numbers, key order inside nested objects).
func sdkToolParameters(name string, schema json.RawMessage) (map[string]any, error) {
	if len(schema) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(schema, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("tool %q: input schema is not a JSON object: %v", name, err)
	}
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	return out, nil
}

// sjsonKey escapes the characters sjson treats as path syntax.
func sjsonKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		if strings.ContainsRune(`.*?|#@\:!=<>%`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sdkOptions are the SDK options the providers used for c's Config.
func sdkOptions(t *testing.T, cfg Config, rt http.RoundTripper) []option.RequestOption {
	t.Helper()
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	opts := []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: rt}), option.WithBaseURL(base), option.WithMaxRetries(0)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.Organization != "" {
		opts = append(opts, option.WithOrganization(cfg.Organization))
	}
	if cfg.Project != "" {
		opts = append(opts, option.WithProject(cfg.Project))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	if len(cfg.ExtraBody) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(cfg.ExtraBody, &fields); err != nil {
			t.Fatal(err)
		}
		for k, v := range fields {
			opts = append(opts, option.WithJSONSet(sjsonKey(k), v))
		}
	}
	return opts
}

// capture is a transport that records one request and answers it with an
// empty event stream.
type capture struct {
	req  *http.Request
	body []byte
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	c.req = r
	c.body, _ = io.ReadAll(r.Body)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// TestSentIsTheSDKs checks that both providers send what the SDK sent for
// the same request and Config: URL, the headers that matter, the body
// with "stream": true and the extra body's fields.
func TestSentIsTheSDKs(t *testing.T) {
	temp := 0.25
	req := &llm.Request{Model: "m", System: "sys", MaxTokens: 10, Temperature: &temp,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi <&>"}},
		Tools:    []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993}}}`)}}}
	for _, cfg := range []Config{
		{},
		{APIKey: "sk", BaseURL: "http://local.test:8080/v1"},
		{APIKey: "sk", BaseURL: "http://local.test/api/v1/", Organization: "org", Project: "proj",
			Headers: map[string]string{"HTTP-Referer": "https://weft.dev", "X-Title": "weft"}},
		{BaseURL: "http://local.test/v1", ReasoningEffort: "low", MaxTokensField: "max_completion_tokens",
			ExtraBody: json.RawMessage(`{"a.b":1,"c:d":[2],"@x":{"y":"z"},"store":true,"stream":false,"model":"other","top_k":20}`)},
	} {
		for _, dialect := range []string{"chat", "responses"} {
			var got, want capture
			cfg.HTTPClient = &http.Client{Transport: &got}
			opts := sdkOptions(t, cfg, &want)
			switch dialect {
			case "chat":
				p, err := NewChat(cfg)
				if err != nil {
					t.Fatal(err)
				}
				for range p.Stream(t.Context(), req) {
				}
				params, err := p.params(req)
				if err != nil {
					t.Fatal(err)
				}
				svc := sdk.NewChatCompletionService(opts...)
				s := svc.NewStreaming(t.Context(), params)
				s.Close()
			case "responses":
				p, err := NewResponses(cfg)
				if err != nil {
					t.Fatal(err)
				}
				for range p.Stream(t.Context(), req) {
				}
				params, err := p.params(req)
				if err != nil {
					t.Fatal(err)
				}
				svc := responses.NewResponseService(opts...)
				s := svc.NewStreaming(t.Context(), params)
				s.Close()
			}
			if got.req == nil || want.req == nil {
				t.Fatalf("%s %+v: sent %v, the SDK %v", dialect, cfg, got.req, want.req)
			}
			if got.req.URL.String() != want.req.URL.String() || got.req.Method != want.req.Method {
				t.Errorf("%s %+v: %s %s, the SDK's %s %s", dialect, cfg, got.req.Method, got.req.URL, want.req.Method, want.req.URL)
			}
			for _, h := range []string{"Authorization", "OpenAI-Organization", "OpenAI-Project", "HTTP-Referer", "X-Title", "Content-Type", "Accept"} {
				if g, w := got.req.Header.Values(h), want.req.Header.Values(h); !slices.Equal(g, w) {
					t.Errorf("%s %+v: header %s = %q, the SDK's %q", dialect, cfg, h, g, w)
				}
			}
			if !sameJSON(t, got.body, want.body) {
				t.Errorf("%s %+v:\nweft    %s\nthe SDK %s", dialect, cfg, got.body, want.body)
			}
		}
	}
}

// TestResponsesBodyIsTheSDKs checks over random requests that the body
// weft encodes itself is the SDK's request, for every item shape (images,
// reasoning items, tool outputs with images) and reasoning setting, and
// that both refuse the same bad requests.
func TestResponsesBodyIsTheSDKs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	compared := 0
	for _, cfg := range []Config{{}, {ReasoningEffort: "high"}, {ReasoningEffort: "low", ReasoningSummary: "none"},
		{ReasoningEffort: "medium", ReasoningSummary: "detailed"}} {
		c, err := newClient("openai", cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := &Responses{c: c}
		for range 300 {
			req := randomImagesRequest(r)
			params, perr := p.params(req)
			body, berr := p.body(req)
			if (perr == nil) != (berr == nil) {
				t.Fatalf("params error %v, body error %v", perr, berr)
			}
			if perr != nil {
				continue
			}
			compared++
			want, err := params.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, body, want) {
				t.Fatalf("body\n%s\nthe SDK\n%s", body, want)
			}
		}
	}
	if compared < 800 {
		t.Fatalf("only %d of the random requests were valid", compared)
	}
}

// TestChatImagesBodyIsTheSDKs is TestChatBodyIsTheSDKs with images in
// user messages and tool results.
func TestChatImagesBodyIsTheSDKs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	c, err := newClient("openai", Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Chat{c: c}
	for range 300 {
		checkBody(t, p, randomImagesRequest(r))
	}
}

func randomImagesRequest(r *rand.Rand) *llm.Request {
	req := &llm.Request{Model: "m", System: randomText(r), MaxTokens: r.IntN(2) * 50}
	if r.IntN(3) == 0 {
		temp := float64(r.IntN(20)) / 10
		req.Temperature = &temp
	}
	if r.IntN(2) == 0 {
		req.Tools = []llm.ToolSpec{{Name: "t", Description: randomText(r)}, {Name: "u",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}}
	}
	img := func() llm.Attachment {
		return llm.Attachment{MediaType: []string{"image/png", "image/jpeg"}[r.IntN(2)], Data: []byte(randomText(r))}
	}
	states := []string{``, `{"openaiResponsesReasoning":[{"type":"reasoning","id":"rs_1","encrypted_content":"xyz","summary":[]}]}`,
		`{"openaiResponsesReasoning":[{"type":"reasoning","id":"a","summary":[{"type":"summary_text","text":"hm"}]},{"type":"reasoning","id":"b"}]}`,
		`{"signature":"x"}`, `{`}
	for range r.IntN(8) {
		m := llm.Message{Content: randomText(r)}
		switch r.IntN(3) {
		case 0:
			m.Role = llm.RoleUser
			for range r.IntN(3) {
				m.Attachments = append(m.Attachments, img())
			}
			if r.IntN(30) == 0 {
				m.Attachments = append(m.Attachments, llm.Attachment{MediaType: "application/pdf"})
			}
		case 1:
			m.Role = llm.RoleAssistant
			m.ProviderState = json.RawMessage(states[r.IntN(len(states))])
			for k := range r.IntN(3) {
				m.ToolCalls = append(m.ToolCalls, event.ToolCall{ID: fmt.Sprint("c", k), Name: randomText(r), Arguments: randomText(r)})
			}
		case 2:
			m.Role, m.ToolCallID, m.ToolName = llm.RoleTool, fmt.Sprint("c", r.IntN(2)), "t"
			for range r.IntN(3) {
				m.Attachments = append(m.Attachments, img())
			}
		}
		req.Messages = append(req.Messages, m)
	}
	return req
}
