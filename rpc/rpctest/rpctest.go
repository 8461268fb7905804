// Package rpctest holds test helpers for servers built on package rpc.
package rpctest

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"weft.dev/weft/internal/jsonrpc/client"
	"weft.dev/weft/rpc"
)

// CheckDiscovery fails t unless every method registered on s (as listed by
// [rpc.Server.Methods]) appears in the rpc.discover document with a
// description, an object params schema and a result schema, and every
// event type or notification listed in wantEvents appears under
// "x-events" or "x-notifications" with a schema. It fetches the document
// through a real stdio connection, so it also checks that the document
// encodes. It leaves no goroutines behind.
func CheckDiscovery(t testing.TB, s *rpc.Server, wantEvents ...string) {
	t.Helper()
	doc := Discover(t, s)
	byName := map[string]Method{}
	for _, m := range doc.Methods {
		byName[m.Name] = m
	}
	for _, m := range s.Methods() {
		d, ok := byName[m.Name]
		switch {
		case !ok:
			t.Errorf("rpc.discover: method %q missing", m.Name)
		case d.Description == "":
			t.Errorf("rpc.discover: method %q has no description", m.Name)
		case d.ParamsSchema == nil || d.ParamsSchema["type"] != "object":
			t.Errorf("rpc.discover: method %q has no object params schema: %v", m.Name, d.ParamsSchema)
		case len(d.Result.Schema) == 0:
			t.Errorf("rpc.discover: method %q has no result schema", m.Name)
		}
	}
	events := map[string]bool{}
	for _, e := range doc.Events {
		if len(e.Schema) == 0 {
			t.Errorf("rpc.discover: event %q has no schema", e.Name)
		}
		events[e.Name] = true
	}
	for _, n := range doc.Notifications {
		if len(n.ParamsSchema) == 0 {
			t.Errorf("rpc.discover: notification %q has no params schema", n.Name)
		}
		events[n.Name] = true
	}
	for _, e := range wantEvents {
		if !events[e] {
			t.Errorf("rpc.discover: event %q missing", e)
		}
	}
}

// Document is the part of the rpc.discover document that tests inspect.
type Document struct {
	OpenRPC string   `json:"openrpc"`
	Methods []Method `json:"methods"`
	// Notifications are what the server sends: their params, by name and
	// as one schema.
	Notifications []struct {
		Name         string         `json:"name"`
		Description  string         `json:"description"`
		ParamsSchema map[string]any `json:"x-paramsSchema"`
	} `json:"x-notifications"`
	Events []struct {
		Name   string         `json:"name"`
		Schema map[string]any `json:"schema"`
	} `json:"x-events"`
	// Errors is the error table: code, kind and retryability.
	Errors []struct {
		Code      int    `json:"code"`
		Kind      string `json:"kind"`
		Retryable bool   `json:"retryable"`
	} `json:"x-errors"`
}

// Method is one method of a [Document].
type Method struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Params      []struct {
		Name     string         `json:"name"`
		Required bool           `json:"required"`
		Schema   map[string]any `json:"schema"`
	} `json:"params"`
	Result struct {
		Schema map[string]any `json:"schema"`
	} `json:"result"`
	ParamsSchema map[string]any `json:"x-paramsSchema"`
	// Mutating marks a method that takes an idempotencyKey.
	Mutating bool `json:"x-mutating"`
	// Notifications name, for a stream, its item and end notifications.
	Notifications []string `json:"x-notifications"`
}

// Discover fetches s's rpc.discover document over an in-memory stdio
// connection, failing t on error.
func Discover(t testing.TB, s *rpc.Server) *Document {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		err := s.ServeStdio(ctx, inR, outW)
		outW.Close()
		served <- err
	}()
	c := client.NewStdio(outR, inW, client.Config{})
	var raw json.RawMessage
	err := c.Call(ctx, "rpc.discover", nil, &raw)
	c.Close()
	cancel()
	<-served
	if err != nil {
		t.Fatalf("rpc.discover: %v", err)
	}
	var doc Document
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("rpc.discover: decode: %v", err)
	}
	return &doc
}
