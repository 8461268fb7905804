// The request encoding of the SDK (github.com/anthropics/anthropic-sdk-go),
// kept as the reference the tests compare weft's own encoding with.

package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// params builds the Messages API request for req.
func (p *Provider) sdkParams(req *llm.Request) (anthropic.MessageNewParams, error) {
	var params anthropic.MessageNewParams
	if req == nil {
		return params, errors.New("nil request")
	}
	if req.Model == "" {
		return params, errors.New("request has no model")
	}
	params.Model = anthropic.Model(req.Model)
	params.MaxTokens = int64(p.maxTokens)
	if req.MaxTokens > 0 {
		params.MaxTokens = int64(req.MaxTokens)
	}
	if req.Temperature != nil {
		// SDK v2 no longer models temperature (deprecated by the API), so it
		// travels as an extra field; models that reject it return a 400.
		params.SetExtraFields(map[string]any{"temperature": *req.Temperature})
	}
	switch {
	case p.thinking.Type == "enabled":
		params.Thinking.OfEnabled = &anthropic.ThinkingConfigEnabledParam{BudgetTokens: p.thinking.BudgetTokens}
	case p.thinking.Type == "adaptive":
		params.Thinking.OfAdaptive = &anthropic.ThinkingConfigAdaptiveParam{}
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	msgs, err := sdkMessages(req.Messages)
	if err != nil {
		return params, err
	}
	params.Messages = msgs
	for i, t := range req.Tools {
		if t.Name == "" {
			return params, fmt.Errorf("tools[%d]: no name", i)
		}
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		} else if !json.Valid(schema) {
			return params, fmt.Errorf("tool %q: input schema is not valid JSON", t.Name)
		}
		tp := &anthropic.ToolParam{
			Name: t.Name,
			// Override sends the caller's JSON Schema verbatim instead of
			// re-shaping it into the SDK's properties/required fields.
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](schema),
		}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	return params, nil
}

// turn is a message under construction; consecutive messages of one role
// are merged into one turn.
type sdkTurn struct {
	assistant bool
	blocks    []anthropic.ContentBlockParamUnion
}

// messages maps the transcript onto Messages API messages.
func sdkMessages(msgs []llm.Message) ([]anthropic.MessageParam, error) {
	var turns []sdkTurn
	add := func(assistant bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].assistant == assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, sdkTurn{assistant: assistant, blocks: blocks})
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			if m.Content != "" {
				add(false, anthropic.NewTextBlock(m.Content))
			}
			for _, a := range m.Attachments {
				img, err := sdkImageBlock(a)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				add(false, anthropic.ContentBlockParamUnion{OfImage: img})
			}
		case llm.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			blocks = append(blocks, sdkThinkingBlocks(m.ProviderState)...)
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, sdkToolInput(tc.Arguments), tc.Name))
			}
			add(true, blocks...)
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("messages[%d]: tool result without a tool call id", i)
			}
			tr := &anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}}
			}
			for _, a := range m.Attachments {
				img, err := sdkImageBlock(a)
				if err != nil {
					return nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: img})
			}
			if m.IsError {
				tr.IsError = anthropic.Bool(true)
			}
			add(false, anthropic.ContentBlockParamUnion{OfToolResult: tr})
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	out := make([]anthropic.MessageParam, len(turns))
	for i, t := range turns {
		if t.assistant {
			out[i] = anthropic.NewAssistantMessage(t.blocks...)
		} else {
			out[i] = anthropic.NewUserMessage(t.blocks...)
		}
	}
	return out, nil
}

// thinkingBlocks decodes the thinking blocks of an assistant message's
// provider state. State that is not this provider's yields none: its
// signatures could not be verified anyway.
func sdkThinkingBlocks(state json.RawMessage) []anthropic.ContentBlockParamUnion {
	if len(state) == 0 {
		return nil
	}
	var st providerState
	if err := json.Unmarshal(state, &st); err != nil || st.Provider != providerName {
		return nil
	}
	var blocks []anthropic.ContentBlockParamUnion
	for _, b := range st.Thinking {
		switch b.Type {
		case "thinking":
			blocks = append(blocks, anthropic.NewThinkingBlock(b.Signature, b.Thinking))
		case "redacted_thinking":
			blocks = append(blocks, anthropic.NewRedactedThinkingBlock(b.Data))
		}
	}
	return blocks
}

// toolInput returns the tool_use input for a call's arguments text: the
// object itself if it is a JSON object, {} if empty, else {"_raw": text}.
func sdkToolInput(args string) any {
	if args == "" {
		return json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err == nil && obj != nil {
		return json.RawMessage(args)
	}
	return map[string]string{"_raw": args}
}

// imageBlock is an attachment as the Messages API's image block with a
// base64 source; it is one wire shape, so that an encoder without the SDK
// can carry it over (the tests check the request body it makes).
func sdkImageBlock(a llm.Attachment) (*anthropic.ImageBlockParam, error) {
	if !strings.HasPrefix(a.MediaType, "image/") {
		return nil, fmt.Errorf("attachment of type %q: only images are sent", a.MediaType)
	}
	return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
		Data:      base64.StdEncoding.EncodeToString(a.Data),
		MediaType: anthropic.Base64ImageSourceMediaType(a.MediaType),
	}}}, nil
}

// sdkSent sends req through the SDK's client as the provider did before it
// left the SDK, and returns the request the SDK made, with its body.
func sdkSent(t *testing.T, p *Provider, cfg Config, req *llm.Request) (*http.Request, []byte, error) {
	t.Helper()
	params, err := p.sdkParams(req)
	if err != nil {
		return nil, nil, err
	}
	var got *http.Request
	var body []byte
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		body, _ = io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithHTTPClient(&http.Client{Transport: rt}), option.WithMaxRetries(0)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/v1")+"/"))
	}
	for k, vs := range cfg.Headers {
		for _, v := range vs {
			opts = append(opts, option.WithHeaderAdd(k, v))
		}
	}
	client := anthropic.NewClient(opts...)
	stream := client.Messages.NewStreaming(t.Context(), params)
	for stream.Next() {
	}
	stream.Close()
	if got == nil {
		return nil, nil, stream.Err()
	}
	return got, body, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// randomText makes strings with what JSON must escape and bytes that are
// not UTF-8.
func randomText(r *rand.Rand) string {
	pieces := []string{"a", "Zürich", "日本", "😀", `"`, `\`, "\n", "\t", "\x00", "<", "&", "\u2028", "\xff", " ", "{}"}
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// TestRequestIsTheSDKs checks over random requests that the request weft
// builds itself (URL, body, the headers that matter) is the one the SDK
// built for the same transcript and settings, and that both refuse the
// same bad requests.
func TestRequestIsTheSDKs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	compared := 0
	for _, cfg := range []Config{
		{APIKey: "k"},
		{APIKey: "k", BaseURL: "http://proxy.test/anthropic/v1", ThinkingBudget: 2048, MaxTokens: 4096},
		{BaseURL: "http://gw.test", Headers: http.Header{"X-Api-Key": {"gw"}, "Anthropic-Beta": {"a", "b"}}, AdaptiveThinking: true},
	} {
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			req := randomRequest(r)
			if i == 0 {
				req = &llm.Request{Model: "m"}
			}
			want, wantBody, werr := sdkSent(t, p, cfg, req)
			got, _, gerr := p.newRequest(t.Context(), req)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("request %+v: the SDK's error %v, weft's %v", req, werr, gerr)
			}
			if werr != nil {
				continue
			}
			compared++
			gotBody, _ := io.ReadAll(got.Body)
			if got.URL.String() != want.URL.String() || got.Method != want.Method {
				t.Fatalf("%s %s, the SDK's %s %s", got.Method, got.URL, want.Method, want.URL)
			}
			if !sameJSON(t, gotBody, wantBody) {
				t.Fatalf("request %+v\nweft    %s\nthe SDK %s", req, gotBody, wantBody)
			}
			for _, h := range []string{"Authorization", "X-Api-Key", "Anthropic-Version", "Anthropic-Beta", "Content-Type", "Accept"} {
				if g, w := got.Header.Values(h), want.Header.Values(h); !slices.Equal(g, w) {
					t.Fatalf("header %s = %q, the SDK's %q", h, g, w)
				}
			}
		}
	}
	if compared < 600 {
		t.Fatalf("only %d of the random requests were valid", compared)
	}
}

func randomRequest(r *rand.Rand) *llm.Request {
	req := &llm.Request{Model: "claude-" + randomText(r), MaxTokens: r.IntN(3) * 100}
	if r.IntN(30) == 0 {
		req.Model = ""
	}
	if r.IntN(2) == 0 {
		req.System = randomText(r)
	}
	if r.IntN(3) == 0 {
		temp := float64(r.IntN(20)) / 10
		req.Temperature = &temp
	}
	schemas := []string{``, `{"type":"object","properties":{"x":{"type":"string","maxLength":9007199254740993}}}`, `[]`, `{`}
	for range r.IntN(3) {
		spec := llm.ToolSpec{Name: "t" + randomText(r), Description: randomText(r), InputSchema: json.RawMessage(schemas[r.IntN(3)])}
		if r.IntN(30) == 0 {
			spec.Name, spec.InputSchema = "", json.RawMessage(schemas[r.IntN(len(schemas))]) // maybe bad
		}
		req.Tools = append(req.Tools, spec)
	}
	args := []string{``, `{"a":1}`, `{"a":[1,"x",null],"b":{"c":1.50}}`, `[1]`, `{`, `null`, `"s"`, ` {"a" : 1} `}
	img := llm.Attachment{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}
	states := []string{``, `{"provider":"anthropic","thinking":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"redacted_thinking","data":"xyz"}]}`,
		`{"provider":"anthropic","thinking":[{"type":"thinking"}]}`, `{"provider":"gemini","parts":[]}`, `{`}
	for range r.IntN(10) {
		m := llm.Message{Content: randomText(r)}
		switch r.IntN(4) {
		case 0:
			m.Role = llm.RoleUser
			if r.IntN(4) == 0 {
				m.Attachments = []llm.Attachment{img, img}
			}
		case 1:
			m.Role = llm.RoleAssistant
			m.ProviderState = json.RawMessage(states[r.IntN(len(states))])
			for k := range r.IntN(3) {
				m.ToolCalls = append(m.ToolCalls, event.ToolCall{ID: fmt.Sprint("toolu_", k), Name: "t", Arguments: args[r.IntN(len(args))]})
			}
		case 2:
			m.Role, m.ToolCallID, m.ToolName, m.IsError = llm.RoleTool, fmt.Sprint("toolu_", r.IntN(2)), "t", r.IntN(2) == 0
			if r.IntN(4) == 0 {
				m.Attachments = []llm.Attachment{img}
			}
			if r.IntN(30) == 0 {
				m.ToolCallID = ""
			}
		case 3:
			m.Role = llm.RoleUser
			if r.IntN(10) > 0 {
				break
			}
			m.Role = llm.Role(randomText(r))
			if r.IntN(3) == 0 {
				m.Attachments = []llm.Attachment{{MediaType: "text/plain", Data: []byte("x")}}
				m.Role = llm.RoleUser
			}
		}
		req.Messages = append(req.Messages, m)
	}
	return req
}

// sameJSON reports whether a and b decode to the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}
