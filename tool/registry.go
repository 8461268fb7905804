package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"weft.dev/weft/event"
)

// DefaultResultBudget is the output budget of [Registry.Call] when
// [CallOptions.ResultBudget] is zero.
const DefaultResultBudget = 64 << 10

// maxNameLen is the longest tool name providers accept.
const maxNameLen = 64

// CallOptions are the per-call settings of [Registry.Call]. The zero value
// means no timeout beyond ctx and the default result budget.
type CallOptions struct {
	// Timeout bounds the tool's run; zero means no timeout beyond ctx. On
	// timeout the tool's ctx is cancelled and the result says it timed out.
	Timeout time.Duration
	// ResultBudget is the most bytes of Output the model sees; longer
	// output is cut at a UTF-8 boundary and ends with a note. Zero means
	// [DefaultResultBudget].
	ResultBudget int
	// Logger receives the stack of a tool that panicked; nil means silent.
	Logger *slog.Logger
}

// Registry is the set of tools offered to the model, and the one place a
// tool call is executed ([Registry.Call]). The zero Registry is not usable;
// call [NewRegistry]. A Registry is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*entry
	// missing maps a name prefix to why the tools under it are missing
	// (see [Registry.SetMissing]).
	missing map[string]string
}

type entry struct {
	tool Tool
	spec Spec
	// schema validates the arguments; nil for a prevalidated tool, which
	// resolves its own at its first call (see entry.validate).
	schema *jsonschema.Resolved
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: make(map[string]*entry)}
}

// Add registers t under its spec's name. It fails if the name is taken or
// invalid (1 to 64 of [a-zA-Z0-9_-], what providers accept) or if the
// input schema is not a JSON Schema object that resolves.
func (r *Registry) Add(t Tool) error {
	if t == nil {
		return errors.New("tool: Add(nil)")
	}
	spec := t.Spec()
	if err := checkName(spec.Name); err != nil {
		return err
	}
	var schema *jsonschema.Resolved
	if _, ok := t.(prevalidated); !ok {
		var err error
		if schema, err = resolveSchema(spec.InputSchema); err != nil {
			return fmt.Errorf("tool %q: %w", spec.Name, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[spec.Name]; dup {
		return fmt.Errorf("tool %q: already registered", spec.Name)
	}
	r.tools[spec.Name] = &entry{tool: t, spec: spec, schema: schema}
	return nil
}

func checkName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("tool: name %q must be 1 to %d characters", name, maxNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("tool: name %q may hold only [a-zA-Z0-9_-]", name)
		}
	}
	return nil
}

func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("no input schema")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("input schema has type %q, want \"object\"", s.Type)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return rs, nil
}

// SetMissing makes a call of an unregistered tool whose name starts with
// prefix answer with reason instead of "unknown tool": the tools of a
// server that could not start ("mcp__<server>__") are missing for a
// reason the model should read. Merge keeps it. An empty reason removes
// the prefix.
func (r *Registry) SetMissing(prefix, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == "" {
		delete(r.missing, prefix)
		return
	}
	if r.missing == nil {
		r.missing = map[string]string{}
	}
	r.missing[prefix] = reason
}

// missingReason is why the unregistered tool name is missing, if a
// prefix of SetMissing says; called with r.mu held.
func (r *Registry) missingReason(name string) (string, bool) {
	for prefix, reason := range r.missing {
		if strings.HasPrefix(name, prefix) {
			return reason, true
		}
	}
	return "", false
}

// Lookup returns the tool registered under name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	if !ok {
		return nil, false
	}
	return e.tool, true
}

// Specs returns the specs of every tool, sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	specs := make([]Spec, 0, len(r.tools))
	for _, e := range r.tools {
		specs = append(specs, e.spec)
	}
	r.mu.RUnlock()
	slices.SortFunc(specs, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return specs
}

func (r *Registry) names() string {
	specs := r.Specs()
	if len(specs) == 0 {
		return "none"
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Call runs the tool name with call and returns what the model sees. It is
// the one place a tool call is executed. Call never panics and reports
// every problem of the call as an error result, never as a Go error:
//
//   - an unknown tool names the available tools;
//   - arguments that are not JSON quote the parse error; empty arguments
//     are taken as {};
//   - arguments that fail the tool's schema name the failing field;
//   - a tool that panics, returns an error, or outlives opts.Timeout
//     (the result then says it timed out) gives an error result;
//   - when ctx is cancelled the result is "cancelled";
//   - output longer than the budget keeps its beginning and its end (about
//     half each, cut at UTF-8 boundaries), with a note in between saying
//     how many bytes were left out of how many and how to read the rest;
//     Truncated is set. The tool sees the budget in [Call.ResultBudget].
//     Invalid UTF-8 is replaced with U+FFFD.
//
// Call runs the tool on the calling goroutine and returns when it returns:
// a tool must honour ctx (see [Tool]). call may be nil; Call does not
// modify it. Safe for concurrent use.
func (r *Registry) Call(ctx context.Context, name string, call *Call, opts CallOptions) Result {
	budget := opts.ResultBudget
	if budget <= 0 {
		budget = DefaultResultBudget
	}
	r.mu.RLock()
	e := r.tools[name]
	reason, isMissing := "", false
	if e == nil {
		reason, isMissing = r.missingReason(name)
	}
	r.mu.RUnlock()
	if isMissing {
		return errorResult(fmt.Sprintf("tool %q is not available: %s", name, reason), budget)
	}
	if e == nil {
		return errorResult(fmt.Sprintf("unknown tool %q; available tools: %s", name, r.names()), budget)
	}
	if ctx.Err() != nil {
		return Result{Output: "cancelled", IsError: true}
	}
	c := Call{}
	if call != nil {
		c = *call
	}
	args, msg := e.validate(c.Arguments)
	if msg != "" {
		return errorResult(fmt.Sprintf("tool %q: %s", name, msg), budget)
	}
	c.Arguments = args
	c.ResultBudget = budget

	tctx := ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	res, err := run(tctx, e.tool, &c, name, opts.Logger)
	switch {
	case ctx.Err() != nil:
		return Result{Output: "cancelled", IsError: true}
	case opts.Timeout > 0 && errors.Is(tctx.Err(), context.DeadlineExceeded):
		out := fmt.Sprintf("tool %q timed out after %v", name, opts.Timeout)
		switch {
		case res.Output != "":
			out += "\n" + res.Output
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			out += "\n" + err.Error()
		}
		res = Result{Output: out, IsError: true}
	case err != nil:
		res = Result{Output: err.Error(), IsError: true}
	}
	return truncate(checkAttachments(res), budget)
}

// checkAttachments keeps the attachments of res that pass
// event.CheckImage, in order, while they stay within event.MaxImages and
// event.MaxImagesBytes together; Output says which were left out and why,
// so the model knows an image is missing rather than seeing nothing.
func checkAttachments(res Result) Result {
	if len(res.Attachments) == 0 {
		return res
	}
	var kept []event.Part
	var notes []string
	total := 0
	for i, p := range res.Attachments {
		err := event.CheckImage(p)
		switch {
		case err != nil:
		case len(kept) == event.MaxImages:
			err = fmt.Errorf("more than %d images", event.MaxImages)
		case total+len(p.Data) > event.MaxImagesBytes:
			err = fmt.Errorf("the images of one result may have %d bytes in all", event.MaxImagesBytes)
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("[image %d (%s, %d bytes) left out: %v]", i+1, p.MediaType, len(p.Data), err))
			continue
		}
		total += len(p.Data)
		kept = append(kept, p)
	}
	res.Attachments = kept
	if len(notes) > 0 {
		if res.Output != "" {
			res.Output += "\n"
		}
		res.Output += strings.Join(notes, "\n")
	}
	return res
}

// validate checks args against the tool's input schema (see validateArgs);
// a prevalidated tool's is resolved at its first use.
func (e *entry) validate(args json.RawMessage) (json.RawMessage, string) {
	schema := e.schema
	if pv, ok := e.tool.(prevalidated); ok {
		rs, err := pv.resolved()
		if err != nil {
			return nil, err.Error()
		}
		schema = rs
	}
	return validateArgs(schema, args)
}

// validateArgs parses and validates raw arguments. It returns the
// arguments to pass on ({} for empty) or a message for the model.
func validateArgs(schema *jsonschema.Resolved, raw json.RawMessage) (json.RawMessage, string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Sprintf("arguments are not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Sprintf("arguments must be a JSON object, not %s", jsonKind(v))
	}
	if schema != nil {
		if err := schema.Validate(v); err != nil {
			return nil, "invalid arguments: " + strings.TrimPrefix(err.Error(), "validating root: ")
		}
	}
	return raw, ""
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// run calls the tool, turning a panic into an error.
func run(ctx context.Context, t Tool, c *Call, name string, log *slog.Logger) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			if log != nil {
				log.Error("tool panicked", "tool", name, "call", c.ID, "panic", p, "stack", string(debug.Stack()))
			}
			res, err = Result{}, fmt.Errorf("tool %q failed: internal error (panic: %v)", name, p)
		}
	}()
	if pv, ok := t.(prevalidated); ok {
		return pv.callValidated(ctx, c)
	}
	return t.Call(ctx, c)
}

func errorResult(msg string, budget int) Result {
	return truncate(Result{Output: msg, IsError: true}, budget)
}

// truncate enforces the budget on res.Output: it keeps the first and the
// last part, about half each, and says in between what it left out.
func truncate(res Result, budget int) Result {
	if !utf8.ValidString(res.Output) {
		res.Output = strings.ToValidUTF8(res.Output, "\uFFFD")
	}
	out := res.Output
	n := len(out)
	if n <= budget {
		return res
	}
	const note = "\n[... truncated: %d bytes in all; %d bytes omitted here, between the first %d and the last %d; " +
		"call read_file with offset/limit, or narrow the command, path or pattern ...]\n"
	// Every number is at most n, so this note is at least as long as the
	// one written.
	keep := max(budget-len(fmt.Sprintf(note, n, n, n, n)), 0)
	head := keep / 2
	for head > 0 && !utf8.RuneStart(out[head]) {
		head--
	}
	tail := n - (keep - head)
	for tail < n && !utf8.RuneStart(out[tail]) {
		tail++
	}
	res.Output = out[:head] + fmt.Sprintf(note, n, tail-head, head, n-tail) + out[tail:]
	res.Truncated = true
	return res
}

// Validate checks args against the input schema of the tool name exactly
// as [Registry.Call] would, without calling it, and returns the arguments
// to pass on ({} for empty). The error, meant for the model, names an
// unknown tool (with the available ones) or what is wrong with args. It
// lets a caller prepare a call before running it elsewhere (a background
// tool process). Safe for concurrent use.
func (r *Registry) Validate(name string, args json.RawMessage) (json.RawMessage, error) {
	r.mu.RLock()
	e := r.tools[name]
	r.mu.RUnlock()
	if e == nil {
		return nil, fmt.Errorf("unknown tool %q; available tools: %s", name, r.names())
	}
	out, msg := e.validate(args)
	if msg != "" {
		return nil, fmt.Errorf("tool %q: %s", name, msg)
	}
	return out, nil
}

// Merge returns a new registry holding the tools of every registry in rs
// (nil ones are skipped), for a caller that offers one set of tools
// beside another (a session's MCP tools beside the host's). Schemas are
// not resolved again; the registries in rs are not changed, and later
// changes to them do not reach the result. It fails if two registries
// hold the same name. Safe for concurrent use.
func Merge(rs ...*Registry) (*Registry, error) {
	n := 0
	for _, r := range rs {
		if r != nil {
			r.mu.RLock()
			n += len(r.tools)
			r.mu.RUnlock()
		}
	}
	out := &Registry{tools: make(map[string]*entry, n)}
	for _, r := range rs {
		if r == nil {
			continue
		}
		r.mu.RLock()
		for name, e := range r.tools {
			if _, dup := out.tools[name]; dup {
				r.mu.RUnlock()
				return nil, fmt.Errorf("tool %q: offered twice", name)
			}
			out.tools[name] = e
		}
		for prefix, reason := range r.missing {
			if out.missing == nil {
				out.missing = map[string]string{}
			}
			out.missing[prefix] = reason
		}
		r.mu.RUnlock()
	}
	return out, nil
}

// Len returns the number of tools. Safe for concurrent use.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.tools)
}

// Subset returns a new registry holding only the tools of r whose names
// are in names (a subagent's share of its parent's tools); names r does
// not hold are ignored. Like [Merge], it shares r's resolved schemas and
// later changes to r do not reach it. A nil r gives an empty registry.
// Safe for concurrent use.
func (r *Registry) Subset(names []string) *Registry {
	out := &Registry{tools: make(map[string]*entry, len(names))}
	if r == nil {
		return out
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, n := range names {
		if e, ok := r.tools[n]; ok {
			out.tools[n] = e
		}
	}
	for prefix, reason := range r.missing {
		if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			if out.missing == nil {
				out.missing = map[string]string{}
			}
			out.missing[prefix] = reason
		}
	}
	return out
}
