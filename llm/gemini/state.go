package gemini

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Kinds of a layout segment.
const (
	kindThought = "thought"
	kindText    = "text"
	kindCall    = "call"
)

// segment is one part of a model response, as it must be sent back: Len
// bytes of the message's Reasoning (thought) or Content (text), or the
// message's tool call number Call; Sig is the part's thought signature.
type segment struct {
	Kind string `json:"kind"`
	Len  int    `json:"len,omitempty"`
	Call int    `json:"call,omitempty"`
	Sig  string `json:"sig,omitempty"`
}

// providerState is the JSON of Finish.ProviderState and Message.ProviderState.
type providerState struct {
	Provider string    `json:"provider"`
	Parts    []segment `json:"parts"`
}

// layout records the parts of a streamed response: consecutive chunks of
// one kind merge into one part until a part with a signature closes it.
type layout struct {
	parts  []segment
	signed bool
}

// text records n bytes of thought or text, with the part's signature.
func (l *layout) text(kind string, n int, sig string) {
	if k := len(l.parts); k > 0 && l.parts[k-1].Kind == kind && l.parts[k-1].Sig == "" {
		// A streamed part arrives in chunks, its signature with the last
		// one (sometimes a chunk without text); the non-streamed response
		// has it on the whole part.
		l.parts[k-1].Len += n
		l.parts[k-1].Sig = sig
	} else {
		l.parts = append(l.parts, segment{Kind: kind, Len: n, Sig: sig})
	}
	l.signed = l.signed || sig != ""
}

// call records the tool call number i.
func (l *layout) call(i int, sig string) {
	l.parts = append(l.parts, segment{Kind: kindCall, Call: i, Sig: sig})
	l.signed = l.signed || sig != ""
}

// state returns the provider state to send back, or nil if the response
// carried no signature: then the message's fields say all there is.
func (l *layout) state() (json.RawMessage, error) {
	if !l.signed {
		return nil, nil
	}
	return json.Marshal(providerState{Provider: providerName, Parts: l.parts})
}

// decodeState returns the layout in a message's provider state, or nil if
// there is none or it is another provider's.
func decodeState(raw json.RawMessage) []segment {
	if len(raw) == 0 {
		return nil
	}
	var st providerState
	if json.Unmarshal(raw, &st) != nil || st.Provider != providerName {
		return nil
	}
	return st.Parts
}

// decodeSignature decodes a thought signature as the API sends it (base64).
// It returns nil for no signature, or one that is not base64.
func decodeSignature(s string) []byte {
	if s == "" {
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b
		}
	}
	return nil
}

// syntheticID is the ID of the call number i of a response that came
// without one: turn is the number of assistant messages in the request, so
// the ID is the same when the request is sent again and differs from every
// earlier response's, like the scripted provider's.
func syntheticID(turn, i int) string {
	return fmt.Sprintf("call_%d_%d", turn, i)
}

// isSyntheticID reports whether id has the form syntheticID gives. Such IDs
// are weft's, not the API's, and are not sent back; the API matches a
// response without an ID to its call by position and name.
func isSyntheticID(id string) bool {
	rest, ok := strings.CutPrefix(id, "call_")
	if !ok {
		return false
	}
	a, b, ok := strings.Cut(rest, "_")
	return ok && isDigits(a) && isDigits(b)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
