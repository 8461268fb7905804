package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"weft.dev/weft/event"
	"weft.dev/weft/llm"
)

// chunk is the part of a GenerateContentResponse weft reads. It is decoded
// from each event by encoding/json, so that a call's arguments keep the
// server's bytes.
type chunk struct {
	Candidates []struct {
		Content *struct {
			Parts []part `json:"parts"`
		} `json:"content"`
		FinishReason  string         `json:"finishReason"`
		FinishMessage string         `json:"finishMessage"`
		Index         int            `json:"index"`
		SafetyRatings []safetyRating `json:"safetyRatings"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string         `json:"blockReason"`
		BlockReasonMessage string         `json:"blockReasonMessage"`
		SafetyRatings      []safetyRating `json:"safetyRatings"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	Error *apiStatus `json:"error"`
}

type part struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought"`
	ThoughtSignature string `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

type safetyRating struct {
	Category string `json:"category"`
	Blocked  bool   `json:"blocked"`
}

// errStopped reports that the consumer stopped iterating.
var errStopped = errors.New("consumer stopped")

// decoder turns the chunks of one response into weft stream events.
type decoder struct {
	yield func(llm.StreamEvent, error) bool
	// turn is the number of assistant messages in the request, for the IDs
	// of calls the server sends without one.
	turn   int
	calls  int
	usage  *event.TokenUsage
	finish string
	layout layout
}

// run reads ev to its end and yields what it carries. It returns the
// finish reason, errStopped if the consumer stopped, or the error that
// ended the stream; the caller yields that error.
func (d *decoder) run(ctx context.Context, ev *events) (string, error) {
	for {
		data, err := ev.next()
		if err != nil {
			if err == io.EOF {
				break
			}
			if ctx.Err() != nil {
				return "", fmt.Errorf("gemini: stream: %w", ctx.Err())
			}
			if d.finish != "" && err != errEventTooLarge {
				// The finish reason arrived; what broke off (or went
				// silent) after it carried no output.
				break
			}
			if e := llm.TimeoutFrom(providerName, err); e != nil {
				return "", e
			}
			if err == errEventTooLarge {
				return "", &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: err}
			}
			return "", &llm.Error{Provider: providerName, Kind: llm.KindStreamCut, Retryable: true,
				Err: fmt.Errorf("reading stream: %w", err)}
		}
		if err := d.handle(data); err != nil {
			return "", err
		}
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("gemini: stream: %w", ctx.Err())
	}
	if d.finish == "" {
		return "", &llm.Error{Provider: providerName, Kind: llm.KindStreamCut, Retryable: true,
			Err: errors.New("stream ended without a finishReason")}
	}
	return d.end()
}

// handle decodes one event and yields its output.
func (d *decoder) handle(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: fmt.Errorf("event %.200q: %w", data, err)}
	}
	if c.Error != nil {
		return streamError(c.Error)
	}
	if u := c.UsageMetadata; u != nil {
		// Each chunk carries the running totals. Gemini counts thoughts
		// apart from the candidates; weft's output includes reasoning, as
		// OpenAI's and Anthropic's do.
		d.usage = &event.TokenUsage{
			InputTokens:     u.PromptTokenCount,
			OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
			CacheReadTokens: u.CachedContentTokenCount,
			ReasoningTokens: u.ThoughtsTokenCount,
		}
	}
	if f := c.PromptFeedback; f != nil && f.BlockReason != "" {
		return blocked("the prompt was blocked", f.BlockReason, f.BlockReasonMessage, f.SafetyRatings)
	}
	for i := range c.Candidates {
		cand := &c.Candidates[i]
		if cand.Index != 0 {
			continue // weft asks for one candidate
		}
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				if err := d.part(p); err != nil {
					return err
				}
			}
		}
		switch fr := cand.FinishReason; fr {
		case "", "FINISH_REASON_UNSPECIFIED":
		case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
			"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
			return blocked("the response was blocked", fr, cand.FinishMessage, cand.SafetyRatings)
		case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL":
			// The model's call could not be parsed or named no declared
			// function; sampling again may produce a good one.
			msg := fr
			if cand.FinishMessage != "" {
				msg += ": " + cand.FinishMessage
			}
			return &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Retryable: true,
				Err: fmt.Errorf("the model produced an invalid function call (%s)", msg)}
		default:
			d.finish = fr
		}
	}
	return nil
}

// blocked is the error for a blocked prompt or response.
func blocked(what, reason, message string, ratings []safetyRating) *llm.Error {
	msg := what + ": " + reason
	var cats []string
	for _, r := range ratings {
		if r.Blocked {
			cats = append(cats, r.Category)
		}
	}
	if len(cats) > 0 {
		msg += " (" + strings.Join(cats, ", ") + ")"
	}
	if message != "" {
		msg += ": " + message
	}
	return &llm.Error{Provider: providerName, Kind: llm.KindSafety, Err: errors.New(msg)}
}

// part yields one part's output and records its place in the layout.
func (d *decoder) part(p part) error {
	switch {
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		i := d.calls
		d.calls++
		id := fc.ID
		if id == "" {
			id = syntheticID(d.turn, i)
		}
		args := "{}"
		if raw := bytes.TrimSpace(fc.Args); len(raw) > 0 && string(raw) != "null" {
			var b bytes.Buffer
			if err := json.Compact(&b, raw); err != nil {
				return &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: fmt.Errorf("functionCall %q args: %w", fc.Name, err)}
			}
			args = b.String()
		}
		d.layout.call(i, p.ThoughtSignature)
		if !d.yield(llm.StreamEvent{ToolCall: &llm.ToolCallDelta{Index: i, ID: id, Name: fc.Name, Arguments: args}}, nil) {
			return errStopped
		}
	case p.Thought:
		d.layout.text(kindThought, len(p.Text), p.ThoughtSignature)
		if p.Text != "" && !d.yield(llm.StreamEvent{Reasoning: p.Text}, nil) {
			return errStopped
		}
	case p.Text != "" || p.ThoughtSignature != "":
		d.layout.text(kindText, len(p.Text), p.ThoughtSignature)
		if p.Text != "" && !d.yield(llm.StreamEvent{Text: p.Text}, nil) {
			return errStopped
		}
	}
	// Other parts (inline data, executable code) answer tools weft does not
	// declare; they are ignored.
	return nil
}

// end yields the usage and the Finish of a stream that ended with a finish
// reason.
func (d *decoder) end() (string, error) {
	reason := finishReason(d.finish, d.calls > 0)
	if d.usage != nil && !d.yield(llm.StreamEvent{Usage: d.usage}, nil) {
		return "", errStopped
	}
	f := &llm.Finish{Reason: reason}
	state, err := d.layout.state()
	if err != nil {
		return "", &llm.Error{Provider: providerName, Kind: llm.KindMalformed, Err: fmt.Errorf("encode provider state: %w", err)}
	}
	f.ProviderState = state
	if !d.yield(llm.StreamEvent{Finish: f}, nil) {
		return "", errStopped
	}
	return reason, nil
}

// finishReason normalises a Gemini finish reason. Gemini says STOP after
// function calls.
func finishReason(fr string, hadCalls bool) string {
	switch fr {
	case "STOP":
		if hadCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	case "MAX_TOKENS", "CONTINUATION":
		return llm.FinishLength
	default:
		if hadCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishOther
	}
}
