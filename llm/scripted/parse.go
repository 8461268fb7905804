package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"weft.dev/weft/llm"
)

// script is a parsed script file. It is immutable after Parse.
type script struct {
	steps []step
	loop  bool
	usage bool
	// summary is the template of the answer to a summary request.
	summary string
	// contextWindow is the window the script declares for its model.
	contextWindow int
}

// step is one scripted response.
type step struct {
	text      string
	reasoning string
	toolCalls []toolCall
	delayMs   int
	err       *stepError
	// finish is the Finish reason; empty means the default (tool_calls if
	// the step has tool calls, else stop).
	finish        string
	providerState json.RawMessage
	// usage, if set, is the usage the step reports in place of the
	// synthetic one.
	usage *stepUsage
}

// stepUsage is a step's scripted token usage.
type stepUsage struct {
	input, output int
}

// toolCall is one scripted tool call.
type toolCall struct {
	id   string
	name string
	// args is the arguments text: compact JSON, or the raw text of a JSON
	// string value (raw is then true).
	args string
	raw  bool
}

// stepError is a scripted provider failure.
type stepError struct {
	kind         string
	status       int
	message      string
	times        int
	retryAfterMs int
	retryable    bool
	afterTokens  int
}

// defaultRetryable reports whether an error of kind is retryable unless
// the script says otherwise.
func defaultRetryable(kind string) bool {
	switch kind {
	case llm.KindRateLimited, llm.KindServer, llm.KindConnection, llm.KindStreamCut:
		return true
	}
	return false
}

// errorKinds returns the kinds a script's error may name.
func errorKinds() []string {
	return []string{llm.KindRateLimited, llm.KindServer, llm.KindConnection, llm.KindAuth, llm.KindBadRequest, llm.KindStreamCut, llm.KindMalformed,
		llm.KindContextOverflow}
}

// finishReasons returns the Finish reasons a step may name.
func finishReasons() []string {
	return []string{llm.FinishStop, llm.FinishToolCalls, llm.FinishLength, llm.FinishOther}
}

// Load reads and parses the script file at path. Errors name path, as
// [Parse] does.
func Load(path string) (*Provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a script. name identifies the script in error messages,
// both here and when the script runs out; it is normally the file's path.
//
// Parsing is strict: unknown fields, duplicate fields, values of the wrong
// type, steps with nothing in them and unknown error kinds are errors. An
// error message names the script and the field, e.g.
// "script.json: steps[2].toolCalls[0].name: required", or the line of a
// syntax error, e.g. "script.json: line 4: invalid JSON: …".
func Parse(name string, data []byte) (*Provider, error) {
	s, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Provider{name: name, script: s, attempts: map[int]int{}}, nil
}

func parse(data []byte) (script, error) {
	s := script{usage: true}
	var root json.RawMessage
	if err := json.Unmarshal(data, &root); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := position(data, syn.Offset)
			return s, fmt.Errorf("line %d, column %d: invalid JSON: %v", line, col, err)
		}
		return s, fmt.Errorf("invalid JSON: %w", err)
	}
	sawSteps := false
	err := fields("", root, func(key string, v json.RawMessage) error {
		var err error
		switch key {
		case "steps":
			sawSteps = true
			s.steps, err = parseSteps("steps", v)
		case "loop":
			s.loop, err = boolean("loop", v)
		case "usage":
			s.usage, err = boolean("usage", v)
		case "summary":
			s.summary, err = str("summary", v)
		case "contextWindow":
			s.contextWindow, err = nonNegative("contextWindow", v)
		case "comment":
			_, err = str("comment", v)
		default:
			return unknown("", key, "steps", "loop", "usage", "summary", "contextWindow", "comment")
		}
		return err
	})
	if err != nil {
		return s, err
	}
	if !sawSteps {
		return s, errors.New("steps: required")
	}
	return s, nil
}

func parseSteps(path string, v json.RawMessage) ([]step, error) {
	var raws []json.RawMessage
	if err := array(path, v, &raws); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("%s: the script needs at least one step", path)
	}
	steps := make([]step, len(raws))
	for i, raw := range raws {
		st, err := parseStep(fmt.Sprintf("%s[%d]", path, i), raw)
		if err != nil {
			return nil, err
		}
		steps[i] = st
	}
	return steps, nil
}

func parseStep(path string, v json.RawMessage) (step, error) {
	var st step
	err := fields(path, v, func(key string, v json.RawMessage) error {
		p := path + "." + key
		var err error
		switch key {
		case "text":
			st.text, err = str(p, v)
		case "reasoning":
			st.reasoning, err = str(p, v)
		case "toolCalls":
			st.toolCalls, err = parseToolCalls(p, v)
		case "delayMs":
			st.delayMs, err = nonNegative(p, v)
		case "error":
			st.err, err = parseError(p, v)
		case "finish":
			st.finish, err = oneOf(p, v, finishReasons())
		case "providerState":
			st.providerState, err = compact(p, v)
		case "usage":
			st.usage, err = parseUsage(p, v)
		case "comment":
			_, err = str(p, v)
		default:
			return unknown(path, key, "text", "reasoning", "toolCalls", "delayMs", "error", "finish", "providerState", "usage", "comment")
		}
		return err
	})
	if err != nil {
		return st, err
	}
	if st.text == "" && st.reasoning == "" && len(st.toolCalls) == 0 && st.err == nil {
		return st, fmt.Errorf("%s: empty step: give text, reasoning, toolCalls or error", path)
	}
	return st, nil
}

func parseUsage(path string, v json.RawMessage) (*stepUsage, error) {
	u := &stepUsage{}
	err := fields(path, v, func(key string, v json.RawMessage) error {
		p := path + "." + key
		var err error
		switch key {
		case "inputTokens":
			u.input, err = nonNegative(p, v)
		case "outputTokens":
			u.output, err = nonNegative(p, v)
		default:
			return unknown(path, key, "inputTokens", "outputTokens")
		}
		return err
	})
	return u, err
}

func parseToolCalls(path string, v json.RawMessage) ([]toolCall, error) {
	var raws []json.RawMessage
	if err := array(path, v, &raws); err != nil {
		return nil, err
	}
	calls := make([]toolCall, len(raws))
	for i, raw := range raws {
		p := fmt.Sprintf("%s[%d]", path, i)
		c := &calls[i]
		c.args = "{}"
		err := fields(p, raw, func(key string, v json.RawMessage) error {
			var err error
			switch key {
			case "id":
				c.id, err = str(p+".id", v)
			case "name":
				c.name, err = str(p+".name", v)
			case "arguments":
				if len(v) > 0 && v[0] == '"' {
					c.raw = true
					c.args, err = str(p+".arguments", v)
				} else {
					var b json.RawMessage
					b, err = compact(p+".arguments", v)
					c.args = string(b)
				}
			default:
				return unknown(p, key, "id", "name", "arguments")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if c.name == "" {
			return nil, fmt.Errorf("%s.name: required", p)
		}
	}
	return calls, nil
}

func parseError(path string, v json.RawMessage) (*stepError, error) {
	e := &stepError{}
	var retryable *bool
	err := fields(path, v, func(key string, v json.RawMessage) error {
		p := path + "." + key
		var err error
		switch key {
		case "kind":
			e.kind, err = oneOf(p, v, errorKinds())
		case "status":
			e.status, err = nonNegative(p, v)
			if err == nil && e.status != 0 && (e.status < 100 || e.status > 599) {
				err = fmt.Errorf("%s: %d is not an HTTP status", p, e.status)
			}
		case "message":
			e.message, err = str(p, v)
		case "times":
			e.times, err = nonNegative(p, v)
		case "retryAfterMs":
			e.retryAfterMs, err = nonNegative(p, v)
		case "retryable":
			var b bool
			b, err = boolean(p, v)
			retryable = &b
		case "afterTokens":
			e.afterTokens, err = nonNegative(p, v)
		default:
			return unknown(path, key, "kind", "status", "message", "times", "retryAfterMs", "retryable", "afterTokens")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if e.kind == "" {
		return nil, fmt.Errorf("%s.kind: required (one of %s)", path, strings.Join(errorKinds(), ", "))
	}
	e.retryable = defaultRetryable(e.kind)
	if retryable != nil {
		e.retryable = *retryable
	}
	return e, nil
}

// fields calls f for each member of the JSON object v, in order. It fails
// if v is not an object or has a key twice.
func fields(path string, v json.RawMessage, f func(key string, v json.RawMessage) error) error {
	if len(v) == 0 || v[0] != '{' {
		return fmt.Errorf("%s: want an object, got %s", orTop(path), kindOf(v))
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	if _, err := dec.Token(); err != nil { // {
		return fmt.Errorf("%s: %w", orTop(path), err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: %w", orTop(path), err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("%s: duplicate field %q", join(path, key), key)
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("%s: %w", join(path, key), err)
		}
		if err := f(key, val); err != nil {
			return err
		}
	}
	return nil
}

func array(path string, v json.RawMessage, out *[]json.RawMessage) error {
	if len(v) == 0 || v[0] != '[' {
		return fmt.Errorf("%s: want an array, got %s", path, kindOf(v))
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func str(path string, v json.RawMessage) (string, error) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", fmt.Errorf("%s: want a string, got %s", path, kindOf(v))
	}
	return s, nil
}

func boolean(path string, v json.RawMessage) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: want true or false, got %s", path, kindOf(v))
}

func nonNegative(path string, v json.RawMessage) (int, error) {
	var n int
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || json.Unmarshal(v, &n) != nil {
		return 0, fmt.Errorf("%s: want a whole number, got %s", path, kindOf(v))
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: must not be negative, got %d", path, n)
	}
	return n, nil
}

func oneOf(path string, v json.RawMessage, allowed []string) (string, error) {
	s, err := str(path, v)
	if err != nil {
		return "", err
	}
	if !slices.Contains(allowed, s) {
		return "", fmt.Errorf("%s: %q is not one of %s", path, s, strings.Join(allowed, ", "))
	}
	return s, nil
}

func compact(path string, v json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b.Bytes(), nil
}

func unknown(path, key string, known ...string) error {
	return fmt.Errorf("%s: unknown field %q (known fields: %s)", orTop(path), key, strings.Join(known, ", "))
}

// kindOf describes a JSON value for an error message.
func kindOf(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "the number " + string(v)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

// position returns the 1-based line and column of byte offset off in data.
// A json.SyntaxError's Offset is just past the offending byte.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off > 0 {
		off--
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
