package rpc_test

import (
	"context"
	"encoding/json"
	"testing"

	"weft.dev/weft/rpc"
	"weft.dev/weft/rpc/rpctest"
)

func TestDiscover(t *testing.T) {
	s := testServer(t, rpc.Config{ServerInfo: rpc.Info{Name: "weft", Version: "test"}}, nil)
	rpctest.CheckDiscovery(t, s, "test.event")

	doc := rpctest.Discover(t, s)
	if doc.OpenRPC != rpc.OpenRPCVersion {
		t.Errorf("openrpc %q", doc.OpenRPC)
	}
	want := []string{"add", "block", "boom", "busy", "echo", "hello", "initialize", "notfound", "panic", "rpc.discover", "subscribe"}
	var got []string
	for _, m := range doc.Methods {
		got = append(got, m.Name)
	}
	if len(got) != len(want) {
		t.Fatalf("methods %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("methods %v, want %v", got, want)
		}
	}
	for _, m := range doc.Methods {
		if m.Name != "add" {
			continue
		}
		if len(m.Params) != 2 || m.Params[0].Name != "a" || !m.Params[0].Required || m.Params[0].Schema["type"] != "integer" {
			t.Errorf("add params: %+v", m.Params)
		}
		props, _ := m.Result.Schema["properties"].(map[string]any)
		if _, ok := props["sum"]; !ok {
			t.Errorf("add result schema: %v", m.Result.Schema)
		}
		if m.ParamsSchema["additionalProperties"] == nil {
			t.Errorf("add params schema lacks additionalProperties:false: %v", m.ParamsSchema)
		}
	}
}

// TestCheckDiscoveryCatchesMissingEvent shows the helper fails when an
// expected event type was never registered.
func TestCheckDiscoveryCatchesMissingEvent(t *testing.T) {
	s := rpc.NewServer(rpc.Config{})
	rpc.Register(s, "x", "X.", func(context.Context, *empty) (*empty, error) { return nil, nil })
	ft := &fakeT{TB: t}
	rpctest.CheckDiscovery(ft, s, "run.started")
	if !ft.failed {
		t.Error("CheckDiscovery passed with a missing event")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Helper()               {}

func TestRegisterPanics(t *testing.T) {
	s := rpc.NewServer(rpc.Config{})
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	h := func(context.Context, *empty) (*empty, error) { return nil, nil }
	mustPanic("reserved", func() { rpc.Register(s, "rpc.x", "", h) })
	mustPanic("duplicate", func() { rpc.Register(s, "initialize", "", h) })
	mustPanic("empty", func() { rpc.Register(s, "", "", h) })
	mustPanic("no schema", func() {
		rpc.Register(s, "ch", "", func(context.Context, *struct{ C chan int }) (*empty, error) { return nil, nil })
	})
}

// initialize answers with the server's name, version and working
// directory as the embedder gave them, so that a client knows where the
// host it attached to runs.
func TestInitializeServerInfo(t *testing.T) {
	s := testServer(t, rpc.Config{ServerInfo: rpc.Info{Name: "weft", Version: "1.2.3", Cwd: "/srv/weft"}}, nil)
	p := startStdio(t, s)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"t"},"protocolVersion":"x"}}`)
	var resp struct {
		Result rpc.InitializeResult `json:"result"`
	}
	if line := p.recv(t); json.Unmarshal([]byte(line), &resp) != nil ||
		resp.Result.ServerInfo != (rpc.Info{Name: "weft", Version: "1.2.3", Cwd: "/srv/weft"}) {
		t.Fatalf("initialize: %s", line)
	}
}
