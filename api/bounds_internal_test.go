package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// An ID a client gives is at most MaxIDBytes (docs/protocol.md: "an ID or
// key 256 bytes"), refused by the params' Validate as invalid_params
// naming it: every string field of every params type whose wire name is
// "id" or ends in "Id", required or not. (A longer one would otherwise
// reach the store and come back, whole, in a not_found's message and
// data.)
func TestValidateBoundsEveryID(t *testing.T) {
	long := strings.Repeat("i", MaxIDBytes+1)
	for _, d := range Methods() {
		info := d.Info()
		for i := range info.Params.NumField() {
			f := info.Params.Field(i)
			if !isID(f) {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			p := d.NewParams()
			v := reflect.ValueOf(p).Elem()
			v.Field(i).SetString(long)
			err := v.Interface().(Params).Validate()
			if err == nil {
				t.Errorf("%s: a %d-byte %s passes Validate", info.Name, len(long), name)
				continue
			}
			// The first error may be another ID's (a required one left
			// empty): give the others and look again. IDs are checked
			// before the other fields.
			checkFieldError(t, info.Name+" "+name, err, "")
			for j := range info.Params.NumField() {
				if j != i && isID(info.Params.Field(j)) {
					v.Field(j).SetString("x")
				}
			}
			err = v.Interface().(Params).Validate()
			if err == nil {
				t.Errorf("%s: a %d-byte %s passes Validate", info.Name, len(long), name)
				continue
			}
			checkFieldError(t, info.Name+" "+name, err, name)
		}
	}
}

// isID reports whether f is an ID a client gives: a string whose wire
// name is "id" or ends in "Id".
func isID(f reflect.StructField) bool {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return f.Type.Kind() == reflect.String && (name == "id" || strings.HasSuffix(name, "Id"))
}

// A value refused for not being one of a field's choices (or a tool name
// refused for its shape) is quoted in the error, clipped: the error of a
// 64 KiB "busy" is not 64 KiB.
func TestValidateClipsRefusedChoices(t *testing.T) {
	big := strings.Repeat("v", 64<<10)
	text := Input{{Type: "text", Text: "hi"}}
	for name, p := range map[string]Params{
		"network":       CreateSessionParams{Network: big},
		"busy":          StartRunParams{SessionID: "s", Input: text, Busy: big},
		"decision":      DecideParams{ApprovalID: "a", Decision: big},
		"status":        ListRequestsParams{Status: big},
		"kind":          ListRequestsParams{Kind: big},
		"tools[0].name": CreateSessionParams{Tools: []ToolSpec{{Name: big, InputSchema: []byte(`{"type":"object"}`)}}},
	} {
		err := p.Validate()
		checkFieldError(t, name, err, name)
		if err != nil && len(err.Error()) > 1<<10 {
			t.Errorf("%s: the error is %d bytes", name, len(err.Error()))
		}
	}
}

// process/start and process/signal bound what they put in a process's
// record and log: the command (MaxShellCommandBytes, before the host
// stores an idempotency receipt, not after), the cwd, the environment,
// a tool's arguments, a signal's payload.
func TestValidateBoundsProcessParams(t *testing.T) {
	env := map[string]string{}
	for i := range 100 {
		env[strings.Repeat("K", 10)+string(rune('a'+i%26))+strings.Repeat("x", i)] = strings.Repeat("v", 1<<10)
	}
	for field, p := range map[string]Params{
		"command": ProcessStartParams{SessionID: "s", Command: strings.Repeat("c", MaxShellCommandBytes+1)},
		"cwd":     ProcessStartParams{SessionID: "s", Command: "ls", Cwd: strings.Repeat("d", MaxReasonBytes+1)},
		"env":     ProcessStartParams{SessionID: "s", Command: "ls", Env: env},
		"args":    ProcessStartParams{SessionID: "s", Tool: "read", Args: json.RawMessage(`"` + strings.Repeat("a", MaxInputBytes) + `"`)},
		"tool":    ProcessStartParams{SessionID: "s", Tool: strings.Repeat("t", 1<<10)},
		"payload": ProcessSignalParams{ID: "p", Name: "n", Payload: json.RawMessage(`"` + strings.Repeat("p", MaxSignalPayloadBytes) + `"`)},
	} {
		err := p.Validate()
		if err == nil {
			t.Errorf("%s: passes Validate", field)
			continue
		}
		checkFieldError(t, field, err, field)
	}
}

// A session's or a run's client tools are bounded in number and in bytes
// (names, descriptions and schemas together), before any schema is
// parsed: each is stored in the log and offered to the model at every
// step.
func TestValidateBoundsClientTools(t *testing.T) {
	tool := func(i int, desc int) ToolSpec {
		return ToolSpec{Name: "t" + strings.Repeat("x", i%8) + string(rune('a'+i%26)) + strings.Repeat("0", i/26),
			Description: strings.Repeat("d", desc), InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	many := make([]ToolSpec, MaxClientTools+1)
	for i := range many {
		many[i] = tool(i, 0)
	}
	big := make([]ToolSpec, 20)
	for i := range big {
		big[i] = tool(i, MaxMetadataBytes) // each within its own limit
	}
	for name, ts := range map[string][]ToolSpec{"too many": many, "too big": big} {
		for _, p := range []Params{CreateSessionParams{Tools: ts}, StartRunParams{SessionID: "ses_1", Input: Input{{Type: "text", Text: "x"}}, Tools: ts}} {
			err := p.Validate()
			var ae *Error
			if !errors.As(err, &ae) || ae.Kind != KindInvalidParams || ae.Data["field"] != "tools" || ae.Data["limit"] == nil {
				t.Errorf("%s, %T: %v; want invalid_params on tools with its limit", name, p, err)
			}
		}
	}
	if err := (CreateSessionParams{Tools: many[:MaxClientTools]}).Validate(); err != nil {
		t.Errorf("%d tools: %v", MaxClientTools, err)
	}
}
