// The request encoding of the SDK (google.golang.org/genai), kept as
// the reference the tests compare weft's own encoding with.

package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/genai"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// request builds the SDK's contents and config for req.
func (p *Provider) sdkRequest(req *llm.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	if req == nil {
		return nil, nil, errors.New("nil request")
	}
	if req.Model == "" {
		return nil, nil, errors.New("request has no model")
	}
	cfg := &genai.GenerateContentConfig{
		// The SDK would send the request again with a continuation token
		// when a response stops early; weft sees that as a finish.
		AutomaticContinuation: genai.Ptr(false),
	}
	if th := p.thinking; th != nil {
		cfg.ThinkingConfig = &genai.ThinkingConfig{IncludeThoughts: th.IncludeThoughts, ThinkingBudget: th.ThinkingBudget,
			ThinkingLevel: genai.ThinkingLevel(th.ThinkingLevel)}
	}
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: req.System}}}
	}
	if req.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(min(req.MaxTokens, 1<<31-1))
	}
	if req.Temperature != nil {
		cfg.Temperature = genai.Ptr(float32(*req.Temperature))
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for i, t := range req.Tools {
			if t.Name == "" {
				return nil, nil, fmt.Errorf("tools[%d]: no name", i)
			}
			fd := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.InputSchema) > 0 {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(t.InputSchema, &obj); err != nil || obj == nil {
					return nil, nil, fmt.Errorf("tool %q: input schema is not a JSON object", t.Name)
				}
				// parametersJsonSchema takes JSON Schema as it is, unlike
				// parameters (an OpenAPI subset that rejects, e.g.,
				// additionalProperties).
				fd.ParametersJsonSchema = t.InputSchema
			}
			decls = append(decls, fd)
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	contents, err := sdkContents(req.Messages)
	if err != nil {
		return nil, nil, err
	}
	return contents, cfg, nil
}

// contents maps the transcript onto Gemini contents. Consecutive messages
// that map to the same role are merged into one content, so the results of
// parallel calls travel together, as the API wants.
func sdkContents(msgs []llm.Message) ([]*genai.Content, error) {
	var out []*genai.Content
	add := func(role string, parts ...*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, &genai.Content{Role: role, Parts: parts})
	}
	names := map[string]string{} // call ID -> function name
	// images holds the images of the tool results of the current run of
	// them: they follow the results' functionResponse parts, in the same
	// content, so that the responses of parallel calls stay together.
	var images []*genai.Part
	for i, m := range msgs {
		if m.Role != llm.RoleTool && len(images) > 0 {
			add(genai.RoleUser, images...)
			images = nil
		}
		switch m.Role {
		case llm.RoleUser:
			if m.Content != "" {
				add(genai.RoleUser, &genai.Part{Text: m.Content})
			}
			parts, err := sdkImageParts(m.Attachments)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			add(genai.RoleUser, parts...)
		case llm.RoleAssistant:
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
			add(genai.RoleModel, sdkModelParts(m)...)
		case llm.RoleTool:
			name := m.ToolName
			if name == "" {
				name = names[m.ToolCallID]
			}
			if name == "" {
				return nil, fmt.Errorf("messages[%d]: tool result for %q without a tool name", i, m.ToolCallID)
			}
			key := "output"
			if m.IsError {
				key = "error"
			}
			add(genai.RoleUser, &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: sdkWireID(m.ToolCallID), Name: name, Response: map[string]any{key: m.Content},
			}})
			parts, err := sdkImageParts(m.Attachments)
			if err != nil {
				return nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			images = append(images, parts...)
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	add(genai.RoleUser, images...)
	return out, nil
}

// imageParts are attachments as inline_data parts (a MIME type and the
// bytes, base64 on the wire): one wire shape per function, so that an
// encoder without the SDK can carry it over.
func sdkImageParts(atts []llm.Attachment) ([]*genai.Part, error) {
	var parts []*genai.Part
	for _, a := range atts {
		if !strings.HasPrefix(a.MediaType, "image/") {
			return nil, fmt.Errorf("attachment of type %q: only images are sent", a.MediaType)
		}
		parts = append(parts, &genai.Part{InlineData: &genai.Blob{MIMEType: a.MediaType, Data: a.Data}})
	}
	return parts, nil
}

// wireID is the call ID sent to the API: none for IDs weft made up.
func sdkWireID(id string) string {
	if isSyntheticID(id) {
		return ""
	}
	return id
}

// modelParts returns the parts of an assistant message: in the order and
// with the thought signatures of the response, if its provider state says
// so; else its text, then its calls. Thoughts go back only with a
// signature: without one the API has no use for them.
func sdkModelParts(m llm.Message) []*genai.Part {
	if parts, ok := sdkReplay(m, decodeState(m.ProviderState)); ok {
		return parts
	}
	var parts []*genai.Part
	if m.Content != "" {
		parts = append(parts, &genai.Part{Text: m.Content})
	}
	for _, tc := range m.ToolCalls {
		parts = append(parts, sdkCallPart(tc, ""))
	}
	return parts
}

// replay rebuilds a response's parts from its layout. It fails if the
// layout does not fit the message (lengths, calls).
func sdkReplay(m llm.Message, layout []segment) ([]*genai.Part, bool) {
	if layout == nil {
		return nil, false
	}
	text, reasoning := m.Content, m.Reasoning
	seen := make([]bool, len(m.ToolCalls))
	var parts []*genai.Part
	for _, s := range layout {
		switch s.Kind {
		case kindThought:
			if s.Len < 0 || s.Len > len(reasoning) {
				return nil, false
			}
			if s.Sig != "" {
				parts = append(parts, &genai.Part{Thought: true, Text: reasoning[:s.Len], ThoughtSignature: decodeSignature(s.Sig)})
			}
			reasoning = reasoning[s.Len:]
		case kindText:
			if s.Len < 0 || s.Len > len(text) {
				return nil, false
			}
			parts = append(parts, &genai.Part{Text: text[:s.Len], ThoughtSignature: decodeSignature(s.Sig)})
			text = text[s.Len:]
		case kindCall:
			if s.Call < 0 || s.Call >= len(m.ToolCalls) || seen[s.Call] {
				return nil, false
			}
			seen[s.Call] = true
			parts = append(parts, sdkCallPart(m.ToolCalls[s.Call], s.Sig))
		default:
			return nil, false
		}
	}
	if text != "" || reasoning != "" {
		return nil, false
	}
	for _, ok := range seen {
		if !ok {
			return nil, false
		}
	}
	return parts, true
}

// callPart is the functionCall part of a call. Arguments that are not a
// JSON object (a model can produce invalid JSON, and the transcript must
// still be sendable) go as {"_raw": "<arguments text>"}.
func sdkCallPart(tc event.ToolCall, sig string) *genai.Part {
	var args map[string]any
	if tc.Arguments != "" {
		if err := json.Unmarshal([]byte(tc.Arguments), &args); err != nil || args == nil {
			args = map[string]any{"_raw": tc.Arguments}
		}
	}
	p := &genai.Part{FunctionCall: &genai.FunctionCall{ID: sdkWireID(tc.ID), Name: tc.Name, Args: args}}
	if sig != "" {
		p.ThoughtSignature = decodeSignature(sig)
	}
	return p
}

// sdkBody sends req through the SDK's client and returns the request it
// made: its URL and body.
func sdkBody(t *testing.T, p *Provider, cfg Config, req *llm.Request) (string, []byte, error) {
	t.Helper()
	contents, gcfg, err := p.sdkRequest(req)
	if err != nil {
		return "", nil, err
	}
	var got *http.Request
	var body []byte
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		body, _ = io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	client, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey: cfg.APIKey, Backend: genai.BackendGeminiAPI, HTTPClient: &http.Client{Transport: rt},
		HTTPOptions: genai.HTTPOptions{BaseURL: cfg.BaseURL, APIVersion: cfg.APIVersion,
			RetryOptions: &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range client.Models.GenerateContentStream(t.Context(), req.Model, contents, gcfg) {
		if err != nil && got == nil {
			return "", nil, err
		}
	}
	if got == nil {
		t.Fatal("the SDK sent nothing")
	}
	return got.URL.String(), body, nil
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
// builds itself (URL, body) is the one google.golang.org/genai built for
// the same transcript, for every message shape and setting, and that
// both refuse the same bad requests.
func TestRequestIsTheSDKs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	budget, level := 1024, "low"
	compared := 0
	for _, mod := range []func(*Config){
		func(*Config) {},
		func(c *Config) { c.IncludeThoughts = true },
		func(c *Config) { c.ThinkingBudget, c.ThinkingLevel = &budget, level },
		func(c *Config) { c.APIVersion = "v1"; c.BaseURL = "http://proxy.test/gemini/" },
	} {
		cfg := Config{APIKey: "k", BaseURL: "http://gemini.test/"}
		mod(&cfg)
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.APIVersion == "" {
			cfg.APIVersion = DefaultAPIVersion
		}
		for i := range 300 {
			req := randomRequest(r)
			if i == 0 {
				req = &llm.Request{Model: "m"}
			}
			wantURL, want, werr := sdkBody(t, p, cfg, req)
			hr, _, gerr := p.newRequest(t.Context(), req)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("request %+v: the SDK's error %v, weft's %v", req, werr, gerr)
			}
			if werr != nil {
				continue
			}
			compared++
			got, _ := io.ReadAll(hr.Body)
			if hr.URL.String() != wantURL {
				t.Fatalf("URL %s, the SDK's %s", hr.URL, wantURL)
			}
			if !sameJSON(t, got, want) {
				t.Fatalf("request %+v\nweft    %s\nthe SDK %s", req, got, want)
			}
			if hr.Header.Get("x-goog-api-key") != "k" || hr.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", hr.Header)
			}
		}
	}
	if compared < 200 {
		t.Fatalf("only %d of the random requests were valid", compared)
	}
	t.Logf("%d requests compared", compared)
}

func randomRequest(r *rand.Rand) *llm.Request {
	models := []string{"gemini-2.5-flash", "models/gemini-3-pro", "tunedModels/x", "a/b", "m?x", "../m", "", "m&x"}
	req := &llm.Request{Model: models[r.IntN(4)], MaxTokens: r.IntN(3) * 100}
	if r.IntN(20) == 0 {
		req.Model = models[r.IntN(len(models))] // maybe a bad one
	}
	if r.IntN(2) == 0 {
		req.System = randomText(r)
	}
	if r.IntN(3) == 0 {
		temp := float64(r.IntN(20)) / 10
		req.Temperature = &temp
	}
	schemas := []string{``, `{"type":"object","properties":{"x":{"type":"string","maxLength":9}}}`, `[]`, `{`}
	for range r.IntN(3) {
		spec := llm.ToolSpec{Name: "t", Description: randomText(r), InputSchema: json.RawMessage(schemas[r.IntN(2)])}
		if r.IntN(20) == 0 {
			spec.Name, spec.InputSchema = "", json.RawMessage(schemas[r.IntN(len(schemas))]) // maybe bad
		}
		req.Tools = append(req.Tools, spec)
	}
	args := []string{``, `{"a":1}`, `{"a":[1,"x",null]}`, `[1]`, `{`, `null`, `"s"`}
	img := llm.Attachment{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}
	for range r.IntN(10) {
		m := llm.Message{Content: randomText(r)}
		switch r.IntN(4) {
		case 0:
			m.Role = llm.RoleUser
			if r.IntN(4) == 0 {
				m.Attachments = []llm.Attachment{img}
			}
		case 1:
			m.Role = llm.RoleAssistant
			m.Reasoning = randomText(r)
			for k := range r.IntN(3) {
				ids := []string{fmt.Sprint("call_1_", k), fmt.Sprint("toolu_", k), ""}
				m.ToolCalls = append(m.ToolCalls, event.ToolCall{ID: ids[r.IntN(len(ids))], Name: "t", Arguments: args[r.IntN(len(args))]})
			}
			if r.IntN(2) == 0 && len(m.Content) > 1 && len(m.Reasoning) > 0 {
				st := providerState{Provider: providerName, Parts: []segment{
					{Kind: kindThought, Len: len(m.Reasoning), Sig: "c2ln"},
					{Kind: kindText, Len: 1}, {Kind: kindText, Len: len(m.Content) - 1, Sig: "AAEC"}}}
				for k := range m.ToolCalls {
					st.Parts = append(st.Parts, segment{Kind: kindCall, Call: k, Sig: "eHl6"})
				}
				m.ProviderState, _ = json.Marshal(st)
			}
		case 2:
			m.Role, m.ToolCallID, m.ToolName, m.IsError = llm.RoleTool, fmt.Sprint("call_1_", r.IntN(2)), "t", r.IntN(2) == 0
			if r.IntN(10) == 0 {
				m.ToolName = "" // the name of the call, if any
			}
			if r.IntN(4) == 0 {
				m.Attachments = []llm.Attachment{img}
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
