package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
	"weft.dev/weft/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type echoIn struct {
	Text  string `json:"text" jsonschema:"what to echo"`
	Times int    `json:"times,omitempty" jsonschema:"how many times"`
}

func newRegistry(t *testing.T) *tool.Registry {
	t.Helper()
	r := tool.NewRegistry()
	add := func(tl tool.Tool, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	add(tool.Func("echo", "Echo text.", func(ctx context.Context, c *tool.Call, in echoIn) (tool.Result, error) {
		return tool.Result{Output: strings.Repeat(in.Text, max(in.Times, 1))}, nil
	}))
	add(tool.Func("fail", "Fail.", func(ctx context.Context, c *tool.Call, in struct{}) (tool.Result, error) {
		return tool.Result{}, errors.New("it broke")
	}))
	add(tool.Func("panic", "Panic.", func(ctx context.Context, c *tool.Call, in struct{}) (tool.Result, error) {
		panic("boom")
	}))
	add(tool.Func("sleep", "Sleep until cancelled.", func(ctx context.Context, c *tool.Call, in struct{}) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{Output: "partial"}, ctx.Err()
	}))
	return r
}

func TestRegistryCall(t *testing.T) {
	r := newRegistry(t)
	tests := []struct {
		name, tool, args string
		opts             tool.CallOptions
		isErr            bool
		want             string // substring
	}{
		{"ok", "echo", `{"text":"hi","times":2}`, tool.CallOptions{}, false, "hihi"},
		{"unknown", "nope", `{}`, tool.CallOptions{}, true, `unknown tool "nope"; available tools: echo, fail, panic, sleep`},
		{"bad json", "echo", `{"text":`, tool.CallOptions{}, true, "not valid JSON: unexpected end of JSON input"},
		{"not object", "echo", `[1]`, tool.CallOptions{}, true, "must be a JSON object, not an array"},
		{"missing field", "echo", `{}`, tool.CallOptions{}, true, `missing properties: ["text"]`},
		{"wrong type", "echo", `{"text":3}`, tool.CallOptions{}, true, "/properties/text"},
		{"extra field", "echo", `{"text":"a","loud":true}`, tool.CallOptions{}, true, `additional properties ["loud"]`},
		{"float for int", "echo", `{"text":"a","times":1.5}`, tool.CallOptions{}, true, "/properties/times"},
		{"empty args", "fail", ``, tool.CallOptions{}, true, "it broke"},
		{"panic", "panic", `{}`, tool.CallOptions{}, true, "panic: boom"},
		{"timeout", "sleep", `{}`, tool.CallOptions{Timeout: 20 * time.Millisecond}, true, "timed out after 20ms\npartial"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Call(t.Context(), tc.tool, &tool.Call{Arguments: json.RawMessage(tc.args)}, tc.opts)
			if res.IsError != tc.isErr || !strings.Contains(res.Output, tc.want) {
				t.Errorf("got %+v, want isError=%v containing %q", res, tc.isErr, tc.want)
			}
		})
	}
}

// Cancelling the caller's ctx while a tool runs ends the call at once,
// without waiting for its timeout, as "cancelled".
func TestRegistryCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t)
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		done := make(chan tool.Result, 1)
		go func() { done <- r.Call(ctx, "sleep", nil, tool.CallOptions{Timeout: time.Minute}) }()
		synctest.Wait() // the tool is running, blocked on its ctx
		select {
		case res := <-done:
			t.Fatalf("the call ended before the cancel: %+v", res)
		default:
		}
		cancel()
		res := <-done
		if !res.IsError || res.Output != "cancelled" {
			t.Errorf("got %+v", res)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the cancelled call took %v of its timeout", d)
		}
		res = r.Call(ctx, "echo", &tool.Call{Arguments: json.RawMessage(`{"text":"x"}`)}, tool.CallOptions{})
		if !res.IsError || res.Output != "cancelled" {
			t.Errorf("already cancelled: %+v", res)
		}
	})
}

func TestRegistryTruncate(t *testing.T) {
	r := newRegistry(t)
	for _, budget := range []int{0, 300, 1000, 1001, 1002, 1003} {
		// "é" is two bytes, "€" three: cuts land inside runes.
		args := `{"text":"aé€","times":100000}`
		res := r.Call(t.Context(), "echo", &tool.Call{Arguments: json.RawMessage(args)}, tool.CallOptions{ResultBudget: budget})
		limit := budget
		if limit == 0 {
			limit = tool.DefaultResultBudget
		}
		if !res.Truncated || len(res.Output) > limit || !utf8.ValidString(res.Output) {
			t.Errorf("budget %d: truncated=%v len=%d valid=%v", budget, res.Truncated, len(res.Output), utf8.ValidString(res.Output))
		}
		if !strings.Contains(res.Output, "truncated: 600000 bytes in all; ") || !strings.Contains(res.Output, "read_file with offset/limit") {
			t.Errorf("budget %d: note missing: %q", budget, res.Output[max(0, len(res.Output)-200):])
		}
		// The beginning and the end survive, and the note counts exactly
		// what it left out.
		if !strings.HasPrefix(res.Output, "aé€") || !strings.HasSuffix(res.Output, "aé€") {
			t.Errorf("budget %d: the beginning or the end is lost: %q … %q", budget, res.Output[:min(20, len(res.Output))], res.Output[max(0, len(res.Output)-20):])
		}
		var omitted, head, tail int
		i := strings.Index(res.Output, "; ") + 2
		if _, err := fmt.Sscanf(res.Output[i:], "%d bytes omitted here, between the first %d and the last %d;", &omitted, &head, &tail); err != nil || head+omitted+tail != 600000 || head == 0 || tail == 0 {
			t.Errorf("budget %d: note says %d omitted between %d and %d (%v)", budget, omitted, head, tail, err)
		}
	}
	res := r.Call(t.Context(), "echo", &tool.Call{Arguments: json.RawMessage(`{"text":"short"}`)}, tool.CallOptions{ResultBudget: 10})
	if res.Truncated || res.Output != "short" {
		t.Errorf("short: %+v", res)
	}
}

func TestRegistryAdd(t *testing.T) {
	r := newRegistry(t)
	dup, _ := tool.Func("echo", "again", func(context.Context, *tool.Call, struct{}) (tool.Result, error) { return tool.Result{}, nil })
	if err := r.Add(dup); err == nil {
		t.Error("duplicate name accepted")
	}
	if _, err := tool.Func("bad name", "", func(context.Context, *tool.Call, struct{}) (tool.Result, error) { return tool.Result{}, nil }); err == nil {
		t.Error("bad name accepted")
	}
	if _, err := tool.Func("str", "", func(context.Context, *tool.Call, string) (tool.Result, error) { return tool.Result{}, nil }); err == nil {
		t.Error("non-object input accepted")
	}
	if err := r.Add(rawTool{schema: `{"type":"string"}`}); err == nil {
		t.Error("non-object schema accepted")
	}
	if err := r.Add(rawTool{schema: ``}); err == nil {
		t.Error("missing schema accepted")
	}
	if _, ok := r.Lookup("echo"); !ok {
		t.Error("Lookup(echo) failed")
	}
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "echo,fail,panic,sleep" {
		t.Errorf("Specs = %v", names)
	}
}

// rawTool is a Tool with a hand-written schema, validated by the registry.
type rawTool struct{ schema string }

func (t rawTool) Spec() tool.Spec {
	return tool.Spec{Name: "raw", Description: "raw", InputSchema: json.RawMessage(t.schema)}
}

func (rawTool) Call(ctx context.Context, c *tool.Call) (tool.Result, error) {
	return tool.Result{Output: string(c.Arguments)}, nil
}

func TestRegistryRawTool(t *testing.T) {
	r := tool.NewRegistry()
	if err := r.Add(rawTool{schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`}); err != nil {
		t.Fatal(err)
	}
	if res := r.Call(t.Context(), "raw", &tool.Call{Arguments: json.RawMessage(`{"n":"x"}`)}, tool.CallOptions{}); !res.IsError || !strings.Contains(res.Output, "/properties/n") {
		t.Errorf("got %+v", res)
	}
	if res := r.Call(t.Context(), "raw", &tool.Call{Arguments: json.RawMessage(`{"n":1}`)}, tool.CallOptions{}); res.IsError || res.Output != `{"n":1}` {
		t.Errorf("got %+v", res)
	}
}

func TestFuncDirectCallValidates(t *testing.T) {
	tl, err := tool.Func("echo", "Echo.", func(ctx context.Context, c *tool.Call, in echoIn) (tool.Result, error) {
		return tool.Result{Output: in.Text}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Call(t.Context(), &tool.Call{Arguments: json.RawMessage(`{"text":1}`)}); err == nil {
		t.Error("direct call skipped validation")
	}
	var schema map[string]any
	if err := json.Unmarshal(tl.Spec().InputSchema, &schema); err != nil || schema["additionalProperties"] != false {
		t.Errorf("schema %s, %v", tl.Spec().InputSchema, err)
	}
}

// A Func tool resolves its schema at its first call: calls that race to
// be first all see it, and each validates.
func TestFuncFirstCallsValidate(t *testing.T) {
	r := newRegistry(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if i%2 == 0 {
				res := r.Call(t.Context(), "echo", &tool.Call{Arguments: json.RawMessage(`{"text":1}`)}, tool.CallOptions{})
				if !res.IsError || !strings.Contains(res.Output, "/properties/text") {
					t.Errorf("call: got %+v, want a schema error", res)
				}
				return
			}
			if _, err := r.Validate("echo", json.RawMessage(`{"text":"a","loud":true}`)); err == nil || !strings.Contains(err.Error(), "loud") {
				t.Errorf("validate: got %v, want a schema error", err)
			}
		})
	}
	wg.Wait()
}

func TestMerge(t *testing.T) {
	a, b := tool.NewRegistry(), tool.NewRegistry()
	mk := func(name string) tool.Tool {
		tl, err := tool.Func(name, "d", func(context.Context, *tool.Call, struct{}) (tool.Result, error) {
			return tool.Result{Output: name}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	a.Add(mk("one"))
	b.Add(mk("two"))
	m, err := tool.Merge(a, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 2 {
		t.Fatalf("%d tools", m.Len())
	}
	if res := m.Call(context.Background(), "two", nil, tool.CallOptions{}); res.Output != "two" {
		t.Fatalf("call: %+v", res)
	}
	a.Add(mk("three"))
	if _, ok := m.Lookup("three"); ok {
		t.Fatal("a later change reached the merged registry")
	}
	if _, err := tool.Merge(a, a); err == nil || !strings.Contains(err.Error(), "offered twice") {
		t.Fatalf("duplicate: %v", err)
	}
}
