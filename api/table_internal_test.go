package api

import (
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// boundMethod returns the name of the Host method descriptor d calls
// ("" for a connection's own method), read from its method expression
// (api.Host.StartRun).
func boundMethod(t *testing.T, d Descriptor) string {
	t.Helper()
	call := reflect.ValueOf(d).FieldByName("call")
	if !call.IsValid() {
		t.Fatalf("%s: descriptor %T has no call field", d.Info().Name, d)
	}
	if call.IsNil() {
		return ""
	}
	name := runtime.FuncForPC(call.Pointer()).Name()
	const prefix = "weft.dev/weft/api.Host."
	if !strings.HasPrefix(name, prefix) {
		t.Fatalf("%s: calls %s, not a method expression of api.Host", d.Info().Name, name)
	}
	return strings.TrimSuffix(strings.TrimPrefix(name, prefix), "-fm")
}

// Every method of Host is bound by exactly one descriptor of the table,
// and only the connection's own methods are bound to none: a Host
// method the table does not list would be served by no transport and
// called by no client.
func TestTableBindsEveryHostMethod(t *testing.T) {
	bound := map[string]string{} // Host method → wire name
	var conn []string
	for _, d := range Methods() {
		info := d.Info()
		m := boundMethod(t, d)
		if m == "" {
			if !info.Conn {
				t.Errorf("%s: no Host method, and not a connection's method", info.Name)
			}
			conn = append(conn, info.Name)
			continue
		}
		if prev, dup := bound[m]; dup {
			t.Errorf("Host.%s is bound by both %s and %s", m, prev, info.Name)
		}
		bound[m] = info.Name
	}
	ht := reflect.TypeFor[Host]()
	for i := range ht.NumMethod() {
		if m := ht.Method(i).Name; bound[m] == "" {
			t.Errorf("Host.%s is bound by no descriptor of the table", m)
		}
	}
	if len(bound) != ht.NumMethod() {
		t.Errorf("the table binds %d methods; Host has %d", len(bound), ht.NumMethod())
	}
	if want := []string{MethodInitialize, MethodDiscover, MethodEventsUnsubscribe}; !slices.Equal(conn, want) {
		t.Errorf("the connection's methods are %v, want %v", conn, want)
	}
}

// The table's entries are well formed: names unique and noun/verb (or
// rpc.*), a doc, params a struct, a stream's notifications listed among
// the notifications, and every notification some stream's.
func TestTableEntries(t *testing.T) {
	seen := map[string]bool{}
	notes := map[string]bool{}
	for _, n := range Notifications() {
		notes[n.Name] = false
	}
	for _, d := range Methods() {
		info := d.Info()
		if seen[info.Name] {
			t.Errorf("%s is listed twice", info.Name)
		}
		seen[info.Name] = true
		if !strings.Contains(info.Name, "/") && !strings.HasPrefix(info.Name, "rpc.") && info.Name != MethodInitialize {
			t.Errorf("%s: want noun/verb", info.Name)
		}
		if info.Doc == "" || !strings.HasSuffix(info.Doc, ".") {
			t.Errorf("%s: doc %q: want a sentence", info.Name, info.Doc)
		}
		if info.Params.Kind() != reflect.Struct {
			t.Errorf("%s: params are %v, want a struct", info.Name, info.Params)
		}
		if reflect.TypeOf(d.NewParams()) != reflect.PointerTo(info.Params) {
			t.Errorf("%s: NewParams returned a value, want a pointer", info.Name)
		}
		if info.Stream() != (len(info.Notifications) == 2) {
			t.Errorf("%s: stream %v with notifications %v", info.Name, info.Stream(), info.Notifications)
		}
		for _, n := range info.Notifications {
			if _, ok := notes[n]; !ok {
				t.Errorf("%s sends %s, which Notifications does not list", info.Name, n)
			}
			notes[n] = true
		}
	}
	for n, used := range notes {
		if !used {
			t.Errorf("notification %s belongs to no stream of the table", n)
		}
	}
}

// A mutating method takes an idempotency key (a string field
// IdempotencyKey, "idempotencyKey" on the wire, optional) and nothing
// else does: the host's idempotency wrapper and the OpenRPC document's
// x-mutating rely on it.
func TestMutatingMethodsTakeAKey(t *testing.T) {
	for _, d := range Methods() {
		info := d.Info()
		f, ok := info.Params.FieldByName("IdempotencyKey")
		switch {
		case info.Mutating && (!ok || f.Type.Kind() != reflect.String || f.Tag.Get("json") != "idempotencyKey,omitempty"):
			t.Errorf("%s mutates but its params %v have no IdempotencyKey string `json:\"idempotencyKey,omitempty\"`", info.Name, info.Params)
		case !info.Mutating && ok:
			t.Errorf("%s does not mutate but its params %v have an IdempotencyKey", info.Name, info.Params)
		}
	}
}

// Each params type checks itself: an idempotency key over MaxIDBytes is
// refused by every mutating method's Validate, and any error Validate
// gives is an *Error of kind invalid_params naming the field.
func TestValidateKeyAndFieldErrors(t *testing.T) {
	long := strings.Repeat("k", MaxIDBytes+1)
	for _, d := range Methods() {
		info := d.Info()
		p := d.NewParams()
		checkFieldError(t, info.Name+" (zero params)", p.(interface{ Validate() error }).Validate(), "")
		if !info.Mutating {
			continue
		}
		reflect.ValueOf(p).Elem().FieldByName("IdempotencyKey").SetString(long)
		err := reflect.ValueOf(p).Elem().Interface().(Params).Validate()
		if err == nil {
			t.Errorf("%s: a %d-byte idempotencyKey passes Validate", info.Name, len(long))
			continue
		}
		checkFieldError(t, info.Name, err, "idempotencyKey")
	}
}

// checkFieldError checks that err, if not nil, is an invalid_params
// *Error naming a field (want, unless empty).
func checkFieldError(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		return
	}
	var ae *Error
	if !errors.As(err, &ae) || ae.Kind != KindInvalidParams {
		t.Errorf("%s: %v (%T), want an invalid_params *api.Error", what, err, err)
		return
	}
	f, _ := ae.Data["field"].(string)
	if f == "" || (want != "" && f != want) {
		t.Errorf("%s: field %q, want %q", what, f, want)
	}
}

// The bad cases each params type refuses on its own, without a host.
func TestValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	text := func(s string) Input { return Input{{Type: "text", Text: s}} }
	choice := 1
	for _, tc := range []struct {
		name  string
		p     Params
		field string // "" when valid
	}{
		{"session/create ok", CreateSessionParams{}, ""},
		{"session/create title", CreateSessionParams{Title: strings.Repeat("t", MaxTitleBytes+1)}, "title"},
		{"session/create metadata", CreateSessionParams{Metadata: map[string]string{"k": strings.Repeat("v", MaxMetadataBytes)}}, "metadata"},
		{"session/update nothing", UpdateSessionParams{SessionID: "s"}, "title"},
		{"session/update no session", UpdateSessionParams{Title: str("x")}, "sessionId"},
		{"session/update ok", UpdateSessionParams{SessionID: "s", Model: str("m")}, ""},
		{"session/list cursor", ListSessionsParams{Cursor: strings.Repeat("c", MaxIDBytes+1)}, ""},
		{"run/start no session", StartRunParams{Input: text("hi")}, "sessionId"},
		{"run/start empty input", StartRunParams{SessionID: "s", Input: text(" ")}, "input"},
		{"run/start busy", StartRunParams{SessionID: "s", Input: text("hi"), Busy: "later"}, "busy"},
		{"run/start maxSteps", StartRunParams{SessionID: "s", Input: text("hi"), MaxSteps: -1}, "maxSteps"},
		{"run/start tool name", StartRunParams{SessionID: "s", Input: text("hi"), Tools: []ToolSpec{{Name: "a b", InputSchema: []byte(`{"type":"object"}`)}}}, "tools[0].name"},
		{"run/start tool ask_user", StartRunParams{SessionID: "s", Input: text("hi"), Tools: []ToolSpec{{Name: ToolAskUser, InputSchema: []byte(`{"type":"object"}`)}}}, "tools[0].name"},
		{"run/start tool schema", StartRunParams{SessionID: "s", Input: text("hi"), Tools: []ToolSpec{{Name: "t", InputSchema: []byte(`{"type":"string"}`)}}}, "tools[0].inputSchema"},
		{"run/start ok", StartRunParams{SessionID: "s", Input: text("hi"), Busy: BusyQueue}, ""},
		{"run/get", RunIDParams{}, "runId"},
		{"run/wait timeout", WaitRunParams{RunID: "r", TimeoutMs: -1}, "timeoutMs"},
		{"run/steer input", SteerParams{RunID: "r"}, "input"},
		{"run/cancel reason", CancelParams{RunID: "r", Reason: strings.Repeat("r", MaxReasonBytes+1)}, "reason"},
		{"events/read limit", ReadEventsParams{SessionID: "s", Limit: -1}, "limit"},
		{"approval/decide decision", DecideParams{ApprovalID: "a", Decision: "maybe"}, "decision"},
		{"input/answer neither", AnswerParams{RequestID: "q"}, "text"},
		{"input/answer both", AnswerParams{RequestID: "q", Text: "x", Choice: &choice}, "text"},
		{"input/answer ok", AnswerParams{RequestID: "q", Choice: &choice}, ""},
		{"tool/result unnamed", ToolResultParams{Output: "x"}, "requestId"},
		{"process/start neither", ProcessStartParams{SessionID: "s"}, "command"},
		{"process/start both", ProcessStartParams{SessionID: "s", Command: "ls", Tool: "read"}, "command"},
		{"process/output offset", ProcessOutputParams{ID: "p", Offset: -1}, "offset"},
		{"process/grant to", ProcessGrantParams{ID: "p"}, "toSessionId"},
		{"process/follow offset", ProcessFollowParams{ID: "p", Offset: -1}, "offset"},
	} {
		err := tc.p.Validate()
		switch {
		case tc.field == "" && err != nil && tc.name != "session/list cursor":
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.name == "session/list cursor":
			// A malformed cursor is a cursor error, not a field error.
			if !errors.Is(err, ErrCursorInvalid) {
				t.Errorf("%s: %v, want cursor_invalid", tc.name, err)
			}
		case tc.field != "" && err == nil:
			t.Errorf("%s: passes, want an error on %s", tc.name, tc.field)
		case tc.field != "":
			checkFieldError(t, tc.name, err, tc.field)
		}
	}
}
